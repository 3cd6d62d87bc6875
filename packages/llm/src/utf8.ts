/**
 * UTF-8 without Node's Buffer, so the tokenizers run in a browser too.
 * TextDecoder drops a leading byte-order mark unless told not to; Buffer keeps
 * it, and a token piece may be exactly that mark, so every decoder here keeps it.
 */
const encoder = new TextEncoder();
const lenient = new TextDecoder('utf-8', { ignoreBOM: true });
const strict = new TextDecoder('utf-8', { ignoreBOM: true, fatal: true });

export function encodeUtf8(text: string): Uint8Array {
  return encoder.encode(text);
}

/** The text of `bytes`; a broken sequence becomes U+FFFD (as Buffer's toString). */
export function decodeUtf8(bytes: Uint8Array): string {
  return lenient.decode(bytes);
}

/** The text of `bytes`, or null when they are not valid UTF-8. */
export function decodeUtf8Strict(bytes: Uint8Array): string | null {
  try {
    return strict.decode(bytes);
  } catch {
    return null;
  }
}

/** `parts` end to end in one new array. */
export function concatBytes(parts: readonly Uint8Array[]): Uint8Array {
  let length = 0;
  for (const p of parts) length += p.length;
  const out = new Uint8Array(length);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
