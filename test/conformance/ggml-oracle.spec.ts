/**
 * Conformance against llama.cpp itself: every block dtype's quantize must write the bytes ggml's
 * quantizer writes (ggml_quantize_chunk without an importance matrix, i.e. what llama-quantize
 * produces), and dequantize must read ggml's blocks to the very f32 values ggml's
 * dequantize_row_<type> gives. The oracle is libggml-base from node-llama-cpp's prebuilt binaries,
 * driven by a small C program (test/support/ggml-oracle.c) compiled here with the system compiler.
 * Without a compiler or the binaries for this platform the suite skips with the reason, except
 * under CI=true, where that fails.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BLOCK_DTYPES, BLOCK_LAYOUT, Tensor, type BlockDType } from '@sparq/core';
import { afterAll, describe, expect, it } from 'vitest';
import { forEachBackend, opIt } from '../support/backends.ts';
import { seeded } from './numeric.ts';

/** ggml's type ids (enum ggml_type) and dequantizer names. */
const GGML: Record<BlockDType, [id: number, dequantize: string]> = {
  q4_0: [2, 'dequantize_row_q4_0'],
  q4_1: [3, 'dequantize_row_q4_1'],
  q5_0: [6, 'dequantize_row_q5_0'],
  q5_1: [7, 'dequantize_row_q5_1'],
  q8_0: [8, 'dequantize_row_q8_0'],
  q2_k: [10, 'dequantize_row_q2_K'],
  q3_k: [11, 'dequantize_row_q3_K'],
  q4_k: [12, 'dequantize_row_q4_K'],
  q5_k: [13, 'dequantize_row_q5_K'],
  q6_k: [14, 'dequantize_row_q6_K'],
  iq4_nl: [20, 'dequantize_row_iq4_nl'],
  iq4_xs: [23, 'dequantize_row_iq4_xs'],
};

/** The oracle program and library, or why there is none. */
function setUpOracle():
  | {
      run: (dtype: BlockDType, x: Float32Array, n: number) => { blocks: Uint8Array; values: Float32Array };
      dir: string;
    }
  | { reason: string } {
  let lib: string;
  try {
    const platformPackage = `@node-llama-cpp/${process.platform}-${process.arch}`;
    const main = createRequire(fileURLToPath(import.meta.resolve('node-llama-cpp'))).resolve(platformPackage);
    lib = join(dirname(dirname(main)), 'bins', `${process.platform}-${process.arch}`, 'libggml-base.so');
    if (!existsSync(lib)) return { reason: `no ${lib}` };
  } catch (error) {
    return {
      reason: `node-llama-cpp's prebuilt binaries for ${process.platform}-${process.arch} are not installed (${(error as Error).message})`,
    };
  }
  const dir = mkdtempSync(join(tmpdir(), 'sparq-ggml-oracle-'));
  const program = join(dir, 'ggml-oracle');
  const source = fileURLToPath(new URL('../support/ggml-oracle.c', import.meta.url));
  // Any C or C++ compiler driver will do (`-x c`): CI guarantees only the native addon's C++ one.
  const compilers = [process.env.CC, 'cc', 'gcc', 'clang', 'c++', 'g++', 'clang++'].filter((c): c is string => !!c);
  const failures: string[] = [];
  for (const compiler of compilers) {
    try {
      execFileSync(compiler, ['-x', 'c', '-O1', '-o', program, source, '-ldl'], { stdio: 'pipe' });
      failures.length = 0;
      break;
    } catch (error) {
      failures.push(`${compiler}: ${(error as Error).message.split('\n')[0]}`);
    }
  }
  if (failures.length > 0) {
    rmSync(dir, { recursive: true, force: true });
    return { reason: `cannot compile the oracle (${failures.join('; ')})` };
  }
  return {
    dir,
    run: (dtype, x, n) => {
      const [id, dequantize] = GGML[dtype];
      const out = execFileSync(program, [lib, String(id), String(n), dequantize], {
        input: Buffer.from(x.buffer, x.byteOffset, x.byteLength),
        maxBuffer: 1 << 28,
      });
      const bytes = (x.length / BLOCK_LAYOUT[dtype].elements) * BLOCK_LAYOUT[dtype].bytes;
      return {
        blocks: new Uint8Array(out.subarray(0, bytes)),
        values: new Float32Array(out.buffer.slice(out.byteOffset + bytes, out.byteOffset + bytes + 4 * x.length)),
      };
    },
  };
}

const oracle = setUpOracle();

/**
 * 48 rows of 512: uniform, heavy tails, one sign, sparse, tiny, exact halves and quarters (rounding
 * ties), sub-blocks of zeros, single spikes, constants, magnitudes up to the largest accepted (65504),
 * values straddling ggml's all-zero threshold GROUP_MAX_EPS (1e-15), and f32 subnormals.
 */
function rows(n: number): Float32Array {
  const random = seeded(2024);
  const kinds = 12;
  const x = new Float32Array(4 * kinds * n);
  for (let r = 0; r < x.length / n; r++) {
    const kind = r % kinds;
    const scale = 2 ** (Math.floor(r / kinds) * 5 - 6); // 2^-6, 2^-1, 2^4, 2^9
    for (let i = 0; i < n; i++) {
      const u = 2 * random() - 1;
      const v = [
        u,
        Math.tan(1.5 * u),
        Math.abs(u) + 0.1,
        i % 5 === 0 ? u : 0,
        u * 1e-6,
        Math.round(u * 16) / 4,
        Math.floor(i / 16) % 2 ? 0 : u,
        i % 37 === 0 ? 50 * u : 0.01 * u,
        0.75,
        i % 11 === 0 ? 65504 * Math.sign(u) : u * 65504,
        u * 2e-15,
        u * 1e-39,
      ][kind];
      x[r * n + i] = kind >= 9 ? v : v * scale;
    }
  }
  return x;
}

if ('reason' in oracle) {
  if (process.env.CI === 'true') {
    describe('ggml oracle', () => {
      it('has llama.cpp and a C compiler (CI=true)', () => {
        throw new Error(`CI=true and the ggml oracle is unavailable: ${oracle.reason}`);
      });
    });
  } else {
    describe.skip(`ggml oracle skipped: ${oracle.reason}`, () => {
      it('needs libggml-base and a C compiler', () => {});
    });
  }
} else {
  afterAll(() => rmSync(oracle.dir, { recursive: true, force: true }));
  const n = 512;
  const x = rows(n);
  forEachBackend('byte-exact with llama.cpp (libggml-base)', (engine) => {
    for (const dtype of BLOCK_DTYPES) {
      opIt(
        engine,
        'quantize',
        `${dtype}: quantize writes ggml's bytes (${x.length / n} rows of ${n})`,
        () => {
          const { blocks } = oracle.run(dtype, x, n);
          const q = Tensor.zeros(dtype, [x.length / n, n]);
          engine.quantize(q, Tensor.f32([x.length / n, n], x));
          const { bytes } = BLOCK_LAYOUT[dtype];
          const firstDiff = q.data.findIndex((b, i) => b !== blocks[i]);
          // Name the first differing block, not a 20 kB array diff.
          expect(
            firstDiff === -1
              ? 'identical'
              : `block ${Math.floor(firstDiff / bytes)} differs at byte ${firstDiff % bytes}`,
          ).toBe('identical');
        },
        dtype,
      );

      opIt(
        engine,
        'dequantize',
        `${dtype}: dequantize reads ggml's blocks to ggml's values`,
        () => {
          const { blocks, values } = oracle.run(dtype, x, n);
          const out = Tensor.zeros('f32', [x.length / n, n]);
          engine.dequantize(out, Tensor.wrap(dtype, blocks, [x.length / n, n]));
          const firstDiff = out.data.findIndex((v, i) => !Object.is(v, values[i]));
          expect(
            firstDiff === -1 ? 'identical' : `element ${firstDiff}: ${out.data[firstDiff]}, ggml ${values[firstDiff]}`,
          ).toBe('identical');
        },
        dtype,
      );
    }
  });
}
