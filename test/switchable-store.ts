import { mkdir, rename, symlink } from 'node:fs/promises';

/**
 * A local store behind a symlink in the folder `at` names paths in, switched in one rename: the sidecar never sees
 * the moment between two states (renaming a directory away and putting something in its place would show it no
 * store at all for a moment, which a listing reads as an empty store). Point it at a file to take the store down.
 * Any folder a program is given can be switched so (`path`), e.g. a scratch dir.
 */
export async function switchableStore(at: (...names: string[]) => string, name: string) {
  const url = `file://${at(name)}`;
  const point = async (target: string) => {
    await symlink(target, at(`${name}.next`));
    await rename(at(`${name}.next`), at(name));
  };
  const directory = async (suffix: string) => {
    const path = at(`${name}.${suffix}`);
    await mkdir(path);
    return path;
  };
  return { path: at(name), url, point, directory };
}
