/** ebr's copy reads the source store's credentials from the usual variables with this before their names. */
const SOURCE_PREFIX = 'SOURCE_';
/**
 * The credential variables of every provider: AWS_, GOOGLE_, AZURE_, OPENSTACK_, ALICLOUD_ and
 * OPENSHIFT_APPLICATION_CREDENTIALS, and `_JSON`.
 */
const CREDENTIALS = /_APPLICATION_CREDENTIALS(_JSON)?$/;
/**
 * Providers whose credentials are a family of variables: OpenStack's OS_* (ebr reads SOURCE_OS_* for a Swift
 * source) and ECS_* (ebr has no source form for ECS; SOURCE_ECS_* is ours, by the same rule).
 */
const FAMILIES = ['OS_', 'ECS_'];

/**
 * The environment a copy's source store reads its credentials from: each `SOURCE_<provider>_APPLICATION_CREDENTIALS`
 * (or `_JSON`) that is set stands in for the variable without the prefix, as in ebr, so that two buckets of one
 * provider can be reached with different credentials; and any SOURCE_OS_* (SOURCE_ECS_*) replaces all of OS_*
 * (ECS_*). Without them, the source reads the same variables as the destination.
 */
export function sourceCredentialsEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const given = Object.keys(env).filter(
    (name) => name.startsWith(SOURCE_PREFIX) && CREDENTIALS.test(name) && env[name],
  );
  const source: NodeJS.ProcessEnv = { ...env };
  // A provider's credentials come as a directory or a JSON file, the file winning: the source's replace both.
  for (const name of given) {
    const base = name.slice(SOURCE_PREFIX.length).replace(/_JSON$/, '');
    delete source[base];
    delete source[`${base}_JSON`];
  }
  for (const name of given) source[name.slice(SOURCE_PREFIX.length)] = env[name];
  for (const family of FAMILIES) {
    const sourceNames = Object.keys(env).filter((name) => name.startsWith(`${SOURCE_PREFIX}${family}`) && env[name]);
    if (sourceNames.length === 0) continue;
    for (const name of Object.keys(source)) if (name.startsWith(family)) delete source[name];
    for (const name of sourceNames) source[name.slice(SOURCE_PREFIX.length)] = env[name];
  }
  return source;
}
