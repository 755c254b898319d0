import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { UsageError } from '../common/errors.js';

/** One setting from a `--config` file, with where it was written (for messages, which never quote the value). */
export interface ConfigSetting {
  value: string | number | boolean;
  where: string;
}

const FLAT_MAP = 'the config file must be a flat map of flag names to values, e.g. "store: s3://bucket/prefix"';

/**
 * Reads a YAML (or JSON) file of settings keyed by flag name. Errors name the file, line and column but never
 * show its text: the file may hold a password.
 */
export async function readConfigFile(path: string): Promise<Map<string, ConfigSetting>> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new UsageError(`--config ${path}: cannot read the file (${(err as NodeJS.ErrnoException).code ?? err})`);
  }
  // Loaded only for a config file: the YAML parser adds ~20 ms to every program's start.
  const { isMap, isScalar, LineCounter, parseDocument } = createRequire(import.meta.url)(
    'yaml',
  ) as typeof import('yaml');
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false });
  const at = (offset = 0) => {
    const { line, col } = lines.linePos(offset);
    return `${path} line ${line}, column ${col}`;
  };
  const [error] = doc.errors;
  if (error) {
    // The parser's own message quotes the offending line, so only its position and kind are kept.
    throw new UsageError(`--config ${at(error.pos[0])}: not valid YAML (${error.code}); fix the file there`);
  }
  const settings = new Map<string, ConfigSetting>();
  if (doc.contents === null) return settings;
  if (!isMap(doc.contents)) throw new UsageError(`--config ${at(doc.contents.range?.[0])}: ${FLAT_MAP}`);
  for (const { key, value } of doc.contents.items) {
    const keyAt = at(isScalar(key) ? key.range?.[0] : undefined);
    if (!isScalar(key) || typeof key.value !== 'string') throw new UsageError(`--config ${keyAt}: ${FLAT_MAP}`);
    const where = `${key.value} (--config ${keyAt})`;
    if (value === null || (isScalar(value) && value.value === null)) throw new UsageError(`${where} has no value`);
    const v = isScalar(value) ? value.value : undefined;
    if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean') {
      throw new UsageError(`${where} holds a nested list or map: ${FLAT_MAP}`);
    }
    settings.set(key.value, { value: v, where });
  }
  return settings;
}
