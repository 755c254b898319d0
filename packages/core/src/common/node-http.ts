/**
 * Node's `http` module, taken without an ES import. An ES import of `node:http` (even of one name) builds the
 * module's namespace from every export, and so reads its lazy `WebSocket`, `CloseEvent` and `MessageEvent`: that
 * loads Node's bundled undici, 12 MB of resident memory (half of it anonymous) that no program here uses (Node
 * 24.21; docs/performance.md). `import type` of `node:http` loads nothing and stays as it is.
 */
export const http = process.getBuiltinModule('node:http');
