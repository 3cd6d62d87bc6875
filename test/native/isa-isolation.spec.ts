/**
 * Portable code must never run an instruction the CPU lacks. The ISA kernels
 * (*_avx2.cc, *_avx512.cc, *_amx.cc) are compiled with wider flags than the
 * rest, and any inline or template function they emit out of line (say,
 * std::vector's growth routine) is a weak symbol that the linker may pick for
 * the whole addon: portable code would then run AVX-512 instructions and die
 * with SIGILL on an AVX2-only CPU. The build renames every weak definition of an
 * ISA object to `name.isa`; this checks the built objects and the linked addon
 * for any that escaped. (The AVX2-only CPU itself is exercised by
 * `scripts/test-avx2-only.sh` under qemu in CI.)
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const buildDir = resolve(dirname(fileURLToPath(import.meta.url)), '../../packages/native/build');
const objDir = join(buildDir, 'obj');
const ISA_OBJECT = /_(avx2|avx512|amx)\.o$/;
/** The exception-personality pointer: identical in every object, and no code. */
const SHARED_DATA = 'DW.ref.__gxx_personality_v0';

/** Defined weak symbols of an object file (nm's W, V, u, v, w). */
function weakSymbols(file: string): string[] {
  const out = execFileSync('nm', ['-P', '--defined-only', file], { encoding: 'utf8' });
  return out
    .split('\n')
    .map((line) => line.split(' '))
    .filter(([name, type]) => name && /^[WVuvw]$/.test(type ?? '') && name !== SHARED_DATA)
    .map(([name]) => name);
}

/** The ISA objects, as paths under obj/ (it mirrors src/: kernels/x86/matvec_avx2.o). */
const isaObjects = (): string[] =>
  existsSync(objDir)
    ? readdirSync(objDir, { recursive: true, encoding: 'utf8' }).filter((f) => ISA_OBJECT.test(f))
    : [];
const built = isaObjects().length > 0;

describe.skipIf(!built && process.env.CI !== 'true')('native ISA isolation (needs the native build)', () => {
  it('every weak definition in an ISA object carries its ISA suffix', () => {
    const objects = isaObjects();
    expect(objects.length).toBeGreaterThan(0);
    for (const file of objects) {
      const isa = ISA_OBJECT.exec(file)![1];
      const escaped = weakSymbols(join(objDir, file)).filter((name) => !name.endsWith(`.${isa}`));
      expect(escaped, `${file} exports weak symbols the portable code could bind to`).toEqual([]);
    }
  });
});
