/**
 * The command line with the etcd password taken out (`--password X`, `--user NAME:X`, the etcd flags' spellings of
 * it), and the password with the flag that gave it, for a program that starts itself again: a process's arguments
 * are visible to every user of the machine, its environment is not. Imports nothing, as it runs before the program
 * loads.
 */
export function withoutPassword(argv: readonly string[]): { argv: string[]; password?: string; flag?: string } {
  const out: string[] = [];
  let password: string | undefined;
  let given: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i];
    if (token === '--') {
      out.push(...argv.slice(i));
      break;
    }
    const [flag, inline] = token.includes('=')
      ? [token.slice(0, token.indexOf('=')), token.slice(token.indexOf('=') + 1)]
      : [token, undefined];
    if (flag !== '--password' && flag !== '--user') {
      out.push(token);
      continue;
    }
    const value = inline ?? argv[++i] ?? '';
    if (flag === '--password') {
      [password, given] = [value, flag];
      continue;
    }
    const at = value.indexOf(':');
    if (at >= 0) [password, given] = [value.slice(at + 1), flag];
    out.push(`--user=${at < 0 ? value : value.slice(0, at)}`);
  }
  return { argv: out, password, flag: given };
}
