/**
 * The caches the native attention kernels do not handle yet: rows in q8_0 / q4_0, or a K
 * transposed whose type differs from the rows' (integer i8 / i4 / i2, or f16 over f32 rows).
 * Their native kernels are issue 24's native work (branch h24-native), which replaces this file.
 * Until then every attention op and kvAppend on such a cache runs the reference implementation,
 * so the native backend computes the reference's numbers on them instead of failing or
 * misreading the bytes. This is the one place that decides it.
 */
import type { BackendOps, KVCache } from '@sparq/core';
import { createReferenceBackend } from '@sparq/reference';

/** True when bind_attention.cc's kernels read this cache: f32 or f16 rows, K transposed (if any) alike. */
export function nativeReadsCache(cache: KVCache): boolean {
  return (cache.dtype === 'f32' || cache.dtype === 'f16') && (cache.kTDType === null || cache.kTDType === cache.dtype);
}

type AttentionOpName = 'kvAppend' | 'attentionDecode' | 'attentionPrefill' | 'sparqDecode' | 'topkDecode' | 'h2oDecode' | 'lmInfiniteDecode';

/** `native`'s attention ops, each sending calls on caches native cannot read to the reference's op. */
export function withReferenceFallback(native: Partial<BackendOps>): Partial<BackendOps> {
  const reference = createReferenceBackend();
  const route = <K extends AttentionOpName>(name: K, cacheArg: number): BackendOps[K] => {
    const fast = native[name] as (...args: unknown[]) => void;
    const slow = reference[name] as (...args: unknown[]) => void;
    return ((...args: unknown[]) => (nativeReadsCache(args[cacheArg] as KVCache) ? fast(...args) : slow(...args))) as BackendOps[K];
  };
  return {
    ...native,
    kvAppend: route('kvAppend', 0),
    attentionDecode: route('attentionDecode', 2),
    attentionPrefill: route('attentionPrefill', 2),
    sparqDecode: route('sparqDecode', 2),
    topkDecode: route('topkDecode', 2),
    h2oDecode: route('h2oDecode', 2),
    lmInfiniteDecode: route('lmInfiniteDecode', 2),
  };
}
