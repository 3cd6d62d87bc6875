/**
 * `sparq bench`: speed on this machine in one command. (a) The attention
 * kernels, dense and SparQ, against S per backend, KV type and thread count,
 * beside spec.md §3's data ratio; (b) prefill and decode tokens/s of a model (a
 * GGUF file, or a generated random-weight llama) at context lengths S, dense
 * against SparQ; (c) llama.cpp on the same file and threads, runs interleaved.
 * The read bandwidth is measured in the same run. Results: the Markdown report
 * (or with --json the JSON) on stdout, and results.json, results.md and SVG
 * plots in --out (rewritten after each part and each end-to-end S, so a long
 * run that is stopped keeps what it measured); progress on stderr.
 */
import { KV_DTYPES, selectBackend, type Engine } from '@sparq/core';
import { SHAPE_NAMES, openModel } from '@sparq/llm';
import '../backends.ts';
import { UsageError, type Command } from '../command.ts';
import { parseFlags } from '../flags.ts';
import { measureReadBandwidth, PROBE_BYTES, releaseProbeBuffer } from '../bench/bandwidth.ts';
import {
  DEFAULT_SHAPE_DIR,
  FULL_SHAPE,
  GENERATED_TYPE,
  QUICK_SHAPE,
  generatedModel,
  givenModel,
  shapeModel,
  wholeModelMemory,
  type BenchModel,
} from '../bench/bench-model.ts';
import { endToEnd } from '../bench/end-to-end.ts';
import { BENCH_FLAGS, SHAPE_LAYERS, SWEEP_HEAD_DIM, benchSettings, type BenchSettings } from '../bench/flags.ts';
import { kernelSweep, sweepMethods } from '../bench/kernel-sweep.ts';
import { openLlamaCpp, type LlamaCppRunner } from '../bench/llama-cpp.ts';
import { machineInfo } from '../bench/machine.ts';
import { nativeControls, type NativeControls } from '../bench/native.ts';
import { markdownReport, writeReport, type BenchResults } from '../bench/report.ts';
import { PREFILL_CHUNK, e2ePositions } from '../bench/sparq-e2e.ts';
import { PROGRESS_EVERY_MS, progress, rateNote } from '../progress.ts';

const USAGE = `sparq bench [--model FILE | --shape NAME [--layers N] [--weights W] [--shape-dir DIR]] [--out DIR] [--quick]
             [--threads LIST] [--backend native|reference|all] [--seq LIST] [--e2e-seq LIST] [--kv LIST]
             [--e2e-kv LIST] [--layout LIST] [--heads N] [--groups LIST] [--decode N] [--reps N] [--time MS]
             [--llama-flash on|off|both] [--no-llama-cpp] [--no-kernels] [--no-e2e] [--json]

Measures speed on this machine, with the read bandwidth measured in the same run:
  kernels      one decode step of attention (--heads KV heads of dim ${SWEEP_HEAD_DIM}, each with g query heads
               for g in --groups), dense and SparQ (r = d/8, k = S/8 and S/16, l = k/4), at each S
               of --seq, per backend, KV type, layout, group and thread count; beside spec.md §3's
               data ratio and % of read bandwidth
  end to end   prefill S tokens, then --decode steps with each method, at each S of --e2e-seq and
               KV type of --e2e-kv: on --model FILE (GGUF), a --shape file, else a generated random
               llama (dim ${FULL_SHAPE.dim}, ${FULL_SHAPE.nHeads} heads of 128, ${FULL_SHAPE.nLayers} layers, ${GENERATED_TYPE.toUpperCase()}); llama.cpp
               (node-llama-cpp, if installed) runs the same file, tokens, threads and KV type,
               alternating with sparq, flash attention on and off (the faster counts, per metric);
               KV bytes and peak RSS of each

  --shape NAME      a random-weight GGUF of a real model's shape: ${SHAPE_NAMES.join(', ')}
                    (dims, heads, KV heads, FFN, vocab, RoPE base from its config.json)
  --layers N        layers of the --shape slice (default ${SHAPE_LAYERS}; per layer, weight and KV bytes are the model's)
  --weights W       --shape weights: q4_k_m (llama.cpp's Q4_K_M mix, default) or q8_0
  --shape-dir DIR   where --shape files are kept and reused (default ${DEFAULT_SHAPE_DIR})
  --out DIR         results.json, results.md and the SVG plots (default ./sparq-bench)
  --quick           tiny sizes (a smoke test, seconds): S 256,512; 2 heads; a 1-layer model
  --threads LIST    native thread counts, e.g. 1,2 (default: 1 and the pool's size)
  --backend B       native, reference, a list, or all (default: the best available)
  --seq LIST        kernel S values (default 1024,...,32768 in powers of 2)
  --e2e-seq LIST    end-to-end S values (default 512,1024,2048,4096)
  --kv LIST         kernel KV types, each of ${KV_DTYPES.join(', ')} or K/V of them (default f16,f32)
  --e2e-kv LIST     end-to-end KV types, both engines: each of ${KV_DTYPES.join(', ')}, or K/V (llama.cpp's -ctk K -ctv V) (default f16)
  --layout LIST     kernel KV layouts k-twice,single-k (default k-twice)
  --groups LIST     kernel GQA group sizes, query heads per KV head (default 1,4,8)
  --decode N        decode steps timed per method (default 16)
  --reps N          end-to-end repetitions per system; the fastest counts (default 1)
  --time MS         time per kernel measurement (default 500); the median run counts
  --llama-flash F   llama.cpp's flash attention: on, off or both (default; the faster counts, per metric)
  --no-llama-cpp    skip llama.cpp;  --no-kernels, --no-e2e skip a part
  --json            the JSON document on stdout instead of the Markdown`;

/** The engines to sweep: the requested ones (each must be available) or the best available. */
async function engines(s: BenchSettings): Promise<Engine[]> {
  if (!s.backends) return [await selectBackend()];
  return Promise.all(s.backends.map((name) => selectBackend({ backend: name })));
}

/** Native thread counts: the flag's, else 1 and the pool's default size. */
function threadCounts(s: BenchSettings, native: NativeControls | null): number[] {
  if (s.threads) return s.threads;
  const all = native ? native.defaultThreads : 1;
  return all > 1 ? [1, all] : [1];
}

export const benchCommand: Command = {
  name: 'bench',
  summary: 'measure attention kernels and end-to-end tokens/s (dense, SparQ, llama.cpp) on this machine',
  usage: USAGE,
  async run(argv) {
    const s = benchSettings(parseFlags(argv, BENCH_FLAGS));
    const log = (line: string) => void process.stderr.write(`${line}\n`);
    const probe = nativeControls();
    const native = 'missing' in probe ? null : probe;
    if ('missing' in probe)
      log(`native addon unavailable (${probe.missing}): no thread control and no bandwidth probe`);
    const sweepEngines = await engines(s);
    const threads = threadCounts(s, native);
    const steps = s.decodeSteps;
    const positions = (S: number) => e2ePositions(S, steps, sweepMethods(S, SWEEP_HEAD_DIM).length);

    const e2eEngine = sweepEngines.find((e) => e.name === 'native') ?? sweepEngines[0];
    let model: BenchModel | null = null;
    let llamaCpp: LlamaCppRunner | null = null;
    const results: BenchResults = {
      command: `sparq bench ${argv.join(' ')}`.trim(),
      date: new Date().toISOString(),
      machine: machineInfo(),
      nativeKernel: native?.kernel ?? null,
      options: { ...s, threads, backends: sweepEngines.map((e) => e.name), sweepHeadDim: SWEEP_HEAD_DIM },
      bandwidth: [],
      kernels: [],
      model: null,
      wholeModel: [],
      endToEnd: [],
      llamaCpp: { status: s.e2e ? 'disabled' : 'skipped' },
    };
    try {
      if (s.e2e) {
        if (s.model) {
          model = givenModel(s.model);
        } else if (s.shape) {
          const m = shapeModel(
            s.shape.name,
            s.shape.layers,
            s.shape.weights,
            s.shape.dir,
            await selectBackend({ backend: 'reference' }),
            log,
          );
          log(`${m.reused ? 'reusing' : 'wrote'} ${m.path} (${m.fileBytes} bytes)`);
          model = m;
        } else {
          log(`writing a random ${s.quick ? 'tiny' : 'llama-shaped'} ${GENERATED_TYPE} model ...`);
          const quantizer = e2eEngine.has('quantize', GENERATED_TYPE)
            ? e2eEngine
            : await selectBackend({ backend: 'reference' });
          model = generatedModel(quantizer, s.quick ? QUICK_SHAPE : FULL_SHAPE, positions(Math.max(...s.e2eSeqs)));
        }
        results.model = { source: model.source, description: model.description, weightBytes: model.weightBytes };
        const shape = s.shape;
        if (shape)
          results.wholeModel = s.e2eSeqs.flatMap((S) =>
            s.e2eKv.map((kv) => wholeModelMemory(shape.name, shape.weights, S, kv, Math.max(...threads))),
          );
      }
      // Everything that can fail on the inputs fails before the slow parts.
      const fallback = process.env.SPARQ_BACKEND ? undefined : await selectBackend({ backend: 'reference' });
      const lm = model ? openModel(e2eEngine, model.path, { fallback }) : null;
      if (lm) {
        const tooLong = s.e2eSeqs.filter((S) => positions(S) > lm.config.seqLen);
        if (tooLong.length > 0)
          throw new UsageError(
            `--e2e-seq ${tooLong.join(',')}: S plus ${positions(0)} decode positions exceeds the model's seq_len ${lm.config.seqLen}`,
          );
      }
      if (lm && s.llamaCpp) {
        const opened = await openLlamaCpp(model!.path);
        if ('missing' in opened) {
          results.llamaCpp = { status: 'absent', reason: opened.missing };
          log(`llama.cpp absent: ${opened.missing}`);
        } else {
          llamaCpp = opened;
          results.llamaCpp = { status: 'ran', version: opened.version };
        }
      }

      const probe = (t: number) =>
        native ? measureReadBandwidth(native, t, s.quick ? 100 : 1500, s.quick ? PROBE_BYTES / 16 : PROBE_BYTES) : null;
      const bandwidth = new Map<number, number>();
      if (native) {
        for (const t of new Set([1, ...threads])) {
          const gbPerS = probe(t)!;
          bandwidth.set(t, gbPerS);
          results.bandwidth.push({ threads: t, gbPerS });
          log(`read bandwidth ${t} thread${t === 1 ? '' : 's'}: ${gbPerS.toFixed(1)} GB/s`);
        }
      }
      if (s.kernels) {
        results.kernels = await kernelSweep({
          engines: sweepEngines,
          native,
          threads,
          seqs: s.seqs,
          heads: s.heads,
          groups: s.groups,
          headDim: SWEEP_HEAD_DIM,
          kv: s.kv,
          layouts: s.layouts,
          timeMs: s.timeMs,
          probe,
          log,
        });
        writeReport(s.out, results); // the kernels' files now: the end-to-end part can take long
      }
      if (lm && model) {
        releaseProbeBuffer(); // 1 GiB that would count in both engines' resident memory
        log(`end to end on ${model.description} (backend ${lm.backend})`);
        const bar = progress('prefill', process.stderr, { everyMs: PROGRESS_EVERY_MS });
        results.endToEnd = await endToEnd({
          lm,
          model,
          llamaCpp,
          native: lm.engine.name === 'native' ? native : null,
          threads,
          seqs: s.e2eSeqs,
          kv: s.e2eKv,
          llamaFlash: s.llamaFlash,
          steps,
          reps: s.reps,
          bandwidth,
          log,
          onProgress: (what, p) => {
            if (p.total > PREFILL_CHUNK) bar.update(p.done, p.total, `${what}: ${rateNote(p)}`);
            if (p.done === p.total) bar.end();
          },
          onRows: (rows) => writeReport(s.out, { ...results, endToEnd: [...rows] }),
        });
      }
    } finally {
      await llamaCpp?.dispose();
      model?.dispose();
    }
    const files = writeReport(s.out, results);
    log(`wrote ${files.join(', ')}`);
    process.stdout.write(s.json ? JSON.stringify(results, null, 2) + '\n' : markdownReport(results));
    return 0;
  },
};
