// Error output of the real trainer stack (Python 3.10, so no ^^^ markers). Line numbers are
// plausible, not exact; the last line of each is what the worker classifies failures by.
import { join } from "node:path";
import { pyStrRepr } from "./python-format.ts";

// Where the training venv lives on the deployment host (SPEC §1); only file names in tracebacks.
const VENV = "/opt/fluxgym/.venv";
const SITE_PACKAGES = `${VENV}/lib/python3.10/site-packages`;
export const PYTHON = `${VENV}/bin/python`;

type Frame = [file: string, line: number, scope: string, code: string];

const OOM_MESSAGE =
  "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 23.56 GiB " +
  "of which 11.69 MiB is free. Including non-PyTorch memory, this process has 23.53 GiB memory in use. Of the allocated " +
  "memory 22.71 GiB is allocated by PyTorch, and 411.95 MiB is reserved by PyTorch but unallocated. If reserved but " +
  "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  " +
  "See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)";

export function cudaOomTraceback(scriptDir: string): string {
  return traceback(
    [
      ...entryFrames(scriptDir),
      [join(scriptDir, "train_network.py"), 1203, "train", "loss = self.process_batch("],
      [join(scriptDir, "train_network.py"), 468, "process_batch", "noise_pred, target, timesteps, weighting = self.get_noise_pred_and_target("],
      [join(scriptDir, "train_network.py"), 326, "get_noise_pred_and_target", "noise_pred = self.call_unet("],
      [join(scriptDir, "sdxl_train_network.py"), 171, "call_unet", "noise_pred = unet(noisy_latents, timesteps, text_embedding, vector_embedding)"],
      [`${SITE_PACKAGES}/torch/nn/modules/module.py`, 1736, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"],
      [`${SITE_PACKAGES}/torch/nn/modules/module.py`, 1747, "_call_impl", "return forward_call(*args, **kwargs)"],
    ],
    OOM_MESSAGE,
  );
}

// diffusers' answer when the model path is not a file, so sd-scripts tried it as a repo id.
export function missingModelTraceback(scriptDir: string, modelPath: string): string {
  return traceback(
    [
      ...entryFrames(scriptDir),
      [join(scriptDir, "train_network.py"), 463, "train", "model_version, text_encoder, vae, unet = self.load_target_model(args, weight_dtype, accelerator)"],
      [join(scriptDir, "sdxl_train_network.py"), 52, "load_target_model", ") = sdxl_train_util.load_target_model(args, accelerator, sdxl_model_util.MODEL_VERSION_SDXL_BASE_V1_0, weight_dtype)"],
      [join(scriptDir, "library/sdxl_train_util.py"), 35, "load_target_model", ") = _load_target_model("],
      [join(scriptDir, "library/sdxl_train_util.py"), 88, "_load_target_model", "pipe = StableDiffusionXLPipeline.from_pretrained("],
      [`${SITE_PACKAGES}/huggingface_hub/utils/_validators.py`, 114, "_inner_fn", "return fn(*args, **kwargs)"],
      [`${SITE_PACKAGES}/diffusers/pipelines/pipeline_utils.py`, 715, "from_pretrained", "raise ValueError("],
    ],
    `ValueError: The provided pretrained_model_name_or_path "${modelPath}" is neither a valid local path nor a valid repo id. Please check the parameter.`,
  );
}

export function datasetConfigTraceback(scriptDir: string, exception: string): string {
  return traceback(
    [
      ...entryFrames(scriptDir),
      [join(scriptDir, "train_network.py"), 370, "train", "user_config = config_util.load_user_config(args.dataset_config)"],
      [join(scriptDir, "library/config_util.py"), 680, "load_user_config", "raise"],
    ],
    exception,
  );
}

export function assertionTraceback(scriptDir: string, message: string): string {
  return traceback(
    [
      ...entryFrames(scriptDir),
      [join(scriptDir, "train_network.py"), 410, "train", "self.assert_extra_args(args, train_dataset_group, val_dataset_group)  # may change some args"],
      [join(scriptDir, "sdxl_train_network.py"), 37, "assert_extra_args", "assert ("],
    ],
    `AssertionError: ${message}`,
  );
}

// What sd-scripts hits first when a path flag it needs was never given.
export function noneArgumentTraceback(scriptDir: string, flag: string): string {
  return traceback(
    [...entryFrames(scriptDir), [join(scriptDir, "train_network.py"), 330, "train", `os.path.exists(args.${flag})`]],
    "TypeError: stat: path should be string, bytes, os.PathLike or integer, not NoneType",
  );
}

// accelerate's simple_launcher when the trainer exits non-zero; accelerate itself then exits 1.
export function calledProcessError(command: string[], exitCode: number): string {
  const accelerate = `${SITE_PACKAGES}/accelerate/commands`;
  return traceback(
    [
      [`${VENV}/bin/accelerate`, 8, "<module>", "sys.exit(main())"],
      [`${accelerate}/accelerate_cli.py`, 48, "main", "args.func(args)"],
      [`${accelerate}/launch.py`, 1168, "launch_command", "simple_launcher(args)"],
      [`${accelerate}/launch.py`, 763, "simple_launcher", "raise subprocess.CalledProcessError(returncode=process.returncode, cmd=cmd)"],
    ],
    `subprocess.CalledProcessError: Command '[${command.map(pyStrRepr).join(", ")}]' returned non-zero exit status ${exitCode}.`,
  );
}

export function cantOpenFile(script: string): string {
  return `${PYTHON}: can't open file ${pyStrRepr(script)}: [Errno 2] No such file or directory\n`;
}

function entryFrames(scriptDir: string): Frame[] {
  return [[join(scriptDir, "sdxl_train_network.py"), 229, "<module>", "trainer.train(args)"]];
}

function traceback(frames: Frame[], exception: string): string {
  const lines = frames.flatMap(([file, line, scope, code]) => [`  File "${file}", line ${line}, in ${scope}`, `    ${code}`]);
  return ["Traceback (most recent call last):", ...lines, exception, ""].join("\n");
}
