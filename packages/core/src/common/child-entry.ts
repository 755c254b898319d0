import { fileURLToPath } from 'node:url';

/**
 * The built `.js` file of a child process's entry module beside the caller (`callerUrl`: its import.meta.url).
 * Tests run core from its TypeScript sources, where no `.js` stands beside them: the child then starts from the
 * build (`dist/`), which scripts/test makes first.
 */
export function childEntry(callerUrl: string, file: string): string {
  const path = fileURLToPath(new URL(file, callerUrl));
  return callerUrl.endsWith('.ts') ? path.replace(/\/src\/(?!.*\/src\/)/, '/dist/') : path;
}
