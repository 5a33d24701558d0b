// A tar archive's members as its headers say, read before anything is unpacked (POSIX ustar, with GNU's long
// names and pax's path records, as GNU tar writes them): each 512-byte header, then its data rounded up to 512.
import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import { fail, ok, type Result } from "../result.ts";

const BLOCK = 512;

export interface TarMember {
  name: string;
  /** "file", "dir", or what else the header's type flag says (a link, a device…), in words. */
  kind: string;
  size: number;
}

const KINDS: Record<string, string> = {
  "0": "file", "\0": "file", "7": "file", "5": "dir", "1": "hard link", "2": "symbolic link",
  "3": "character device", "4": "block device", "6": "FIFO",
};

export function tarMembers(archive: string): Result<TarMember[]> {
  const fd = openSync(archive, "r");
  try {
    return readMembers(fd, fstatSync(fd).size);
  } finally {
    closeSync(fd);
  }
}

function readMembers(fd: number, total: number): Result<TarMember[]> {
  if (total === 0) return fail("it is empty");
  if (total % BLOCK !== 0) {
    return fail(`it is not a tar archive, or one cut short (${total} bytes, not whole 512-byte blocks)`);
  }
  const members: TarMember[] = [];
  const header = new Uint8Array(BLOCK);
  let longName: string | null = null;
  for (let at = 0; at + BLOCK <= total; ) {
    readSync(fd, header, 0, BLOCK, at);
    if (header.every((b) => b === 0)) return ok(members);
    if (!checksumHolds(header)) return fail(`it is not a tar archive (a bad header at byte ${at})`);
    const size = sizeOf(header);
    const dataAt = at + BLOCK;
    if (size === null || dataAt + size > total) return fail(`it is cut short (a member's data runs past its end)`);
    at = dataAt + Math.ceil(size / BLOCK) * BLOCK;
    const flag = String.fromCharCode(header[156]!);
    if (flag === "L" || flag === "x") {
      const data = new Uint8Array(size);
      readSync(fd, data, 0, size, dataAt);
      longName = flag === "L" ? cString(data, 0, size) : paxPath(data) ?? longName;
      continue;
    }
    if (flag === "g") continue;
    const prefix = cString(header, 345, 155);
    const name = longName ?? (prefix === "" ? cString(header, 0, 100) : `${prefix}/${cString(header, 0, 100)}`);
    longName = null;
    members.push({ name, kind: KINDS[flag] ?? `a member of type ${JSON.stringify(flag)}`, size });
  }
  return ok(members);
}

function checksumHolds(header: Uint8Array): boolean {
  const recorded = parseInt(cString(header, 148, 8).trim(), 8);
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : header[i]!;
  return recorded === sum;
}

// Octal, or GNU's base-256 (first byte 0x80) for sizes past 8 GiB.
function sizeOf(header: Uint8Array): number | null {
  if (header[124]! & 0x80) {
    let n = 0;
    for (let i = 125; i < 136; i++) n = n * 256 + header[i]!;
    return Number.isSafeInteger(n) ? n : null;
  }
  const text = cString(header, 124, 12).trim();
  return /^[0-7]*$/.test(text) ? parseInt(text || "0", 8) : null;
}

function cString(bytes: Uint8Array, start: number, length: number): string {
  const field = bytes.subarray(start, start + length);
  const end = field.indexOf(0);
  return new TextDecoder().decode(end === -1 ? field : field.subarray(0, end));
}

// pax records: "<length> <key>=<value>\n"; only `path` names a member.
function paxPath(data: Uint8Array): string | null {
  const text = new TextDecoder().decode(data);
  for (const record of text.split("\n")) {
    const match = /^\d+ path=(.*)$/s.exec(record);
    if (match) return match[1]!;
  }
  return null;
}
