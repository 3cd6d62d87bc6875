/**
 * Registers both backends: the reference (always loads) and the native one
 * (when its addon loads). Every entry of `sparq` (the top level, `sparq/llm`,
 * `sparq/core`) imports this first, so `selectBackend()` finds them wherever a
 * user starts.
 */
import '@sparq/reference';
import '@sparq/native';
