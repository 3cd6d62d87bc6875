/**
 * `sparq/core`: everything of @sparq/core, the tensor and KV cache layer under
 * the curated top level: validation helpers (`validate*`), memory and storage
 * helpers (`allocAligned`, `storageView`, `setMemoryAdvisor`, ...), the op
 * declarations and block layouts. Both backends are registered on import.
 */
import './backends.ts';

export * from '@sparq/core';
