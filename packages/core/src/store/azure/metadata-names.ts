/**
 * Azure metadata names must be C# identifiers, so the `-` our keys may hold (see ../metadata.ts) is stored
 * as `_`, which our keys never contain; reading maps it back.
 */
export function toAzureMetadata(metadata: Record<string, string> | undefined): Record<string, string> | undefined {
  if (!metadata) return undefined;
  return Object.fromEntries(Object.entries(metadata).map(([k, v]) => [k.replace(/-/g, '_'), v]));
}

export function fromAzureMetadata(metadata: Record<string, string> | undefined): Record<string, string> {
  return Object.fromEntries(Object.entries(metadata ?? {}).map(([k, v]) => [k.toLowerCase().replace(/_/g, '-'), v]));
}
