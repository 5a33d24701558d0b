/**
 * Every `type` an item of a 422's `detail` may carry: the OpenAPI document enumerates this list and
 * docs/troubleshooting.md explains each one (test/unit/detail-types.test.ts holds the three together).
 */
export const DETAIL_TYPES = [
  // A field's shape, in pydantic's words where it has one (arbo's client reads pydantic's 422 shape).
  "missing",
  "extra_forbidden",
  "type_error",
  "too_small",
  "too_big",
  "pattern_mismatch",
  "enum",
  "duplicate_key",
  "value_error",
  // The last item of a 422 that lists only the first faults (request/schema.ts MAX_LISTED_FAULTS).
  "too_many_faults",
  // The Idempotency-Key header.
  "idempotency_mismatch",
  // A path as written.
  "path_not_absolute",
  "path_not_normalized",
  "path_bad_character",
  "path_control_character",
  "path_malformed_unicode",
  "path_option_like",
  // A path as the filesystem has it.
  "path_outside_root",
  "path_not_found",
  "path_dangling_link",
  "path_unresolvable",
  "path_unreadable",
  "not_a_directory",
  "not_a_file",
  "not_safetensors",
  "path_changed",
  // The dataset's own checks (no copy needed).
  "dataset_empty",
  "dataset_ambiguous",
  "dataset_unreadable",
  "dataset_file_outside_root",
  "dataset_file_not_regular",
  "dataset_file_unreadable",
  "dataset_file_too_large",
  "dataset_too_many_files",
  "dataset_too_large",
  // The base model's header.
  "safetensors_invalid",
  "not_sdxl_checkpoint",
  // The device.
  "unknown_device",
  "tier_device_mismatch",
  "dataset_other_person",
] as const;

export type DetailType = (typeof DETAIL_TYPES)[number];
