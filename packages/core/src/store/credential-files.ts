import { readdir, readFile, stat } from 'node:fs/promises';
import { extname, join } from 'node:path';
import { UsageError } from '../common/errors.js';

/**
 * Credentials laid out the way ebr reads them, so existing Kubernetes Secrets keep working: a directory of
 * one-value files (`<PROVIDER>_APPLICATION_CREDENTIALS`) or one JSON file (`..._JSON`); a JSON file inside the
 * directory wins over the single files. Values are never put into messages.
 */
export interface CredentialSource {
  /** Where the values came from, for messages (paths only). */
  origin: string;
  values: Record<string, string>;
  /** Files to watch: a change of any of their mtimes means the Secret was rotated. */
  files: string[];
}

export interface CredentialEnv {
  /** Name of the variable that holds a directory, e.g. AWS_APPLICATION_CREDENTIALS. */
  directory: string;
  /** Name of the variable that holds a JSON file, e.g. AWS_APPLICATION_CREDENTIALS_JSON. */
  json: string;
}

export async function readCredentials(
  names: CredentialEnv,
  fields: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<CredentialSource | undefined> {
  const jsonFile = env[names.json];
  if (jsonFile) return readJsonCredentials(jsonFile, names.json, fields);
  const dir = env[names.directory];
  if (!dir) return undefined;
  let entries: string[];
  try {
    entries = (await readdir(dir)).sort();
  } catch (err) {
    throw new UsageError(
      `${names.directory}=${dir}: cannot read the credentials directory (${(err as Error).message})`,
    );
  }
  const json = entries.find((e) => extname(e) === '.json');
  if (json) return readJsonCredentials(join(dir, json), names.directory, fields);
  const values: Record<string, string> = {};
  const files: string[] = [dir];
  for (const field of fields) {
    if (!entries.includes(field)) continue;
    const file = join(dir, field);
    values[field] = (await readFile(file, 'utf8')).trim();
    files.push(file);
  }
  return { origin: `${names.directory}=${dir}`, values, files };
}

async function readJsonCredentials(
  file: string,
  variable: string,
  fields: readonly string[],
): Promise<CredentialSource> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(file, 'utf8'));
  } catch (err) {
    // JSON.parse messages quote the text they failed on, which may be a secret: name the file only.
    const reason = err instanceof SyntaxError ? 'not valid JSON' : (err as Error).message;
    throw new UsageError(`${variable}: cannot read credentials file ${file} (${reason})`);
  }
  if (!parsed || typeof parsed !== 'object') throw new UsageError(`${variable}: ${file} does not hold a JSON object`);
  const values: Record<string, string> = {};
  for (const field of fields) {
    const value = (parsed as Record<string, unknown>)[field];
    if (value !== undefined && value !== null) values[field] = String(value).trim();
  }
  return { origin: `${variable} (${file})`, values, files: [file] };
}

/** A cheap fingerprint of the files' modification times, to notice rotated Secrets without a restart. */
export async function filesVersion(files: readonly string[]): Promise<string> {
  const parts = await Promise.all(
    files.map((f) =>
      stat(f).then(
        (s) => `${s.mtimeMs}:${s.size}`,
        () => 'missing',
      ),
    ),
  );
  return parts.join('|');
}

/**
 * Re-reads credentials when their files change: `current()` stats the files (cheap) and loads again only when
 * a modification time moved. Concurrent callers share one load.
 */
export class RotatingCredentials {
  private loaded?: Promise<{ version: string; source: CredentialSource | undefined }>;

  constructor(private readonly load: () => Promise<CredentialSource | undefined>) {}

  async current(): Promise<CredentialSource | undefined> {
    const previous = this.loaded;
    if (previous) {
      const { version, source } = await previous;
      if (!source || (await filesVersion(source.files)) === version) return source;
      if (this.loaded !== previous) return (await this.loaded!).source;
    }
    this.loaded = this.reload();
    return (await this.loaded).source;
  }

  private async reload(): Promise<{ version: string; source: CredentialSource | undefined }> {
    const source = await this.load();
    // Kubernetes swaps a Secret's files in one rename, so a read and the stat after it see the same version.
    return { version: source ? await filesVersion(source.files) : '', source };
  }
}
