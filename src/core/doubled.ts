/**
 * Growth of typed-array buffers that are indexed directly (not appended through IntColumn): a
 * copy twice as long, so n writes cost O(n) copying in all.
 */

/** A copy of `a` twice as long, `a`'s contents first and zeros after. */
export function doubled<T extends Int32Array | Uint8Array | Float64Array>(a: T): T {
  const b = new (a.constructor as new (length: number) => T)(a.length * 2);
  b.set(a);
  return b;
}
