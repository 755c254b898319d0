/**
 * Loaded with `--import` in child processes that run the TypeScript sources (see typescript-child.ts). Node
 * runs .ts itself, but the sources import each other as `.js` (NodeNext style): this finds the `.ts` beside
 * a missing `.js`.
 */
import { existsSync } from 'node:fs';
import { registerHooks } from 'node:module';
import { fileURLToPath } from 'node:url';

registerHooks({
  resolve(specifier, context, nextResolve) {
    if (
      specifier.endsWith('.js') &&
      (specifier.startsWith('.') || specifier.startsWith('file:')) &&
      context.parentURL
    ) {
      const url = new URL(specifier, context.parentURL);
      const ts = new URL(url.href.replace(/\.js$/, '.ts'));
      if (url.protocol === 'file:' && !existsSync(fileURLToPath(url)) && existsSync(fileURLToPath(ts))) {
        return nextResolve(ts.href, context);
      }
    }
    return nextResolve(specifier, context);
  },
});
