/**
 * The machine a benchmark ran on: CPU model, core count and the CPU flags
 * (`lscpu`'s Flags line, read from /proc/cpuinfo on Linux), with the SIMD ones
 * picked out for the report.
 */
import { existsSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';

export interface MachineInfo {
  cpu: string;
  cores: number;
  /** Every flag the kernel reports (empty off Linux). */
  flags: string[];
  /** The flags that decide the kernels: AVX*, FMA, F16C, AMX*. */
  simdFlags: string[];
}

const SIMD = /^(avx|fma|f16c|amx|sse4_2)/;

export function machineInfo(): MachineInfo {
  const info = cpus();
  const cpuinfo = existsSync('/proc/cpuinfo') ? readFileSync('/proc/cpuinfo', 'utf8') : '';
  const flags = /^flags\s*:\s*(.*)$/m.exec(cpuinfo)?.[1].trim().split(/\s+/) ?? [];
  return {
    cpu: info[0]?.model.trim() ?? 'unknown',
    cores: info.length,
    flags,
    simdFlags: flags.filter((f) => SIMD.test(f)),
  };
}
