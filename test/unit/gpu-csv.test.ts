import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import {
  DEVICE_QUERY,
  parseHeaderless,
  parseQuantity,
  PROCESS_QUERY,
  readDeviceNumbers,
  splitCsvLine,
  toDeviceRow,
  toProcessRow,
} from "../../src/gpu/nvidia-smi.ts";
import { joinDevices } from "../../src/gpu/probe.ts";
import { parseWithHeader } from "../support/nvidia-csv.ts";

const REAL = join(import.meta.dir, "../fixtures/real");
const real = (name: string) => Bun.file(join(REAL, name)).text();
const MASKED_UUID = "GPU-00000000-0000-0000-0000-000000000000";

describe("query-gpu output", () => {
  test("a noheader,nounits line parses with its own field list, [N/A] fan and all", async () => {
    const fields = ["memory.total", "memory.free", "memory.used", "temperature.gpu", "fan.speed", "utilization.gpu", "utilization.memory"];
    const text = await real("nvidia-smi-query-gpu-noheader-1.txt");
    const records = parseHeaderless(text, { fields }, (record) => record);
    expect(records).toEqual({
      ok: true,
      value: [{ "memory.total": "2004", "memory.free": "2004", "memory.used": "0", "temperature.gpu": "44", "fan.speed": "[N/A]", "utilization.gpu": "0", "utilization.memory": "0" }],
    });
    const numbers = parseHeaderless(text, { fields }, readDeviceNumbers);
    expect(numbers).toEqual({ ok: true, value: [{ memory_total_mib: 2004, memory_used_mib: 0, memory_free_mib: 2004, utilization_pct: 0 }] });
  });

  test("a headed csv,nounits table of 16 GPUs reads its fields from the header", async () => {
    const parsed = parseWithHeader(await real("nvidia-smi-query-gpu-1.txt"), undefined, readDeviceNumbers);
    if (!parsed.ok) throw new Error(`did not parse: ${parsed.error}`);
    expect(parsed.value).toHaveLength(16);
    expect(parsed.value[1]).toEqual({ memory_total_mib: null, memory_used_mib: 11149, memory_free_mib: 21351, utilization_pct: 98 });
  });

  test("a headed line without a trailing newline parses", async () => {
    const parsed = parseWithHeader(await real("nvidia-smi-query-gpu-2.txt"), undefined, (record) => record);
    if (!parsed.ok) throw new Error(`did not parse: ${parsed.error}`);
    expect(parsed.value[0]?.["fan.speed"]).toBe("[N/A]");
    expect(readDeviceNumbers(parsed.value[0] ?? {})).toEqual({ memory_total_mib: null, memory_used_mib: 0, memory_free_mib: 16280, utilization_pct: 0 });
  });

  test("values with units (csv without nounits) are read as numbers", async () => {
    const parsed = parseWithHeader(await real("nvidia-smi-query-gpu-3.txt"), undefined, readDeviceNumbers);
    expect(parsed).toEqual({ ok: true, value: [{ memory_total_mib: 81559, memory_used_mib: 19818, memory_free_mib: 61263, utilization_pct: 100 }] });
  });

  test("the header line itself is not a device row, so output with a header is rejected at that line", () => {
    const text = "index, pci.bus_id, uuid, name, memory.total [MiB], memory.used [MiB], memory.free [MiB], utilization.gpu [%]\n";
    expect(parseHeaderless(text, DEVICE_QUERY, toDeviceRow)).toEqual({ ok: false, error: text.trim() });
  });

  test("the human table is rejected at its first line", async () => {
    const text = await real("nvidia-smi-table-6.txt");
    expect(parseHeaderless(text, DEVICE_QUERY, toDeviceRow)).toEqual({ ok: false, error: text.split("\n")[0] ?? "" });
  });
});

describe("query-compute-apps output", () => {
  test("three processes with MiB units parse", async () => {
    const parsed = parseWithHeader(await real("nvidia-smi-compute-apps-2.txt"), "process_name", toProcessRow);
    expect(parsed).toEqual({
      ok: true,
      value: [
        { gpu_uuid: MASKED_UUID, pid: 11327, name: "/root/tools/memhog", used_mib: 2566 },
        { gpu_uuid: MASKED_UUID, pid: 11328, name: "/root/tools/memhog", used_mib: 1542 },
        { gpu_uuid: MASKED_UUID, pid: 11345, name: "./gpu_burn", used_mib: 15690 },
      ],
    });
  });

  test("Windows paths with spaces keep their names and [N/A] memory reads as null", async () => {
    const parsed = parseWithHeader(await real("nvidia-smi-compute-apps-3.txt"), "process_name", toProcessRow);
    if (!parsed.ok) throw new Error(`did not parse: ${parsed.error}`);
    expect(parsed.value).toHaveLength(10);
    expect(parsed.value.every((row) => row.used_mib === null)).toBe(true);
    expect(parsed.value[4]).toEqual({ gpu_uuid: MASKED_UUID, pid: 20372, name: "C:\\Program Files\\NZXT CAM\\NZXT CAM.exe", used_mib: null });
  });

  test("a header with no rows is no processes", async () => {
    expect(parseWithHeader(await real("nvidia-smi-compute-apps-4.txt"), "process_name", toProcessRow)).toEqual({ ok: true, value: [] });
  });

  test("a process name holding commas is recovered whole", () => {
    const line = "GPU-5e1c0a3b, 4242, python3 /opt/tts/server.py --voices en,de, fr, 3000";
    expect(parseHeaderless(line, PROCESS_QUERY, toProcessRow)).toEqual({
      ok: true,
      value: [{ gpu_uuid: "GPU-5e1c0a3b", pid: 4242, name: "python3 /opt/tts/server.py --voices en,de, fr", used_mib: 3000 }],
    });
  });

  test("without a free field the same line does not split", () => {
    const line = "GPU-5e1c0a3b, 4242, python3 /opt/tts/server.py --voices en,de, fr, 3000";
    expect(splitCsvLine(line, { fields: PROCESS_QUERY.fields })).toBeUndefined();
  });
});

describe("values", () => {
  test("unknowns are null, a trailing unit is tolerated, anything else is not a quantity", () => {
    const read = ["[N/A]", "[Not Supported]", "N/A", "24576", "24576 MiB", "7 %", "7%", "12.5", "abc", "", "-1", "3 GiB"].map(parseQuantity);
    expect(read).toEqual([null, null, null, 24576, 24576, 7, 7, 12.5, undefined, undefined, undefined, undefined]);
  });
});

describe("joining devices and processes", () => {
  const device = (index: number, bus_id: string, uuid: string) => ({
    index, bus_id, uuid, name: `gpu ${index}`, memory_total_mib: 1, memory_used_mib: 0, memory_free_mib: 1, utilization_pct: 0,
  });

  test("devices come out in PCI bus order, each with the processes of its UUID", () => {
    const devices = [device(1, "00000000:9B:00.0", "GPU-b"), device(0, "00000000:1a:00.0", "GPU-a")];
    const processes = [
      { gpu_uuid: "GPU-b", pid: 7, name: "trainer", used_mib: 100 },
      { gpu_uuid: "GPU-a", pid: 8, name: "tts", used_mib: null },
      { gpu_uuid: "GPU-gone", pid: 9, name: "elsewhere", used_mib: 5 },
    ];
    const joined = joinDevices(devices, processes);
    expect(joined.map((d) => [d.uuid, d.processes])).toEqual([
      ["GPU-a", [{ pid: 8, name: "tts", used_mib: null }]],
      ["GPU-b", [{ pid: 7, name: "trainer", used_mib: 100 }]],
    ]);
  });
});
