/** The known name closest to a mistyped one, if it is close enough to be what was meant. */
export function closestName(given: string, known: Iterable<string>): string | undefined {
  const wanted = given.toLowerCase().replaceAll('_', '-');
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(wanted.length / 4)) + 1;
  for (const name of known) {
    const distance = editDistance(wanted, name);
    if (distance < bestDistance) [best, bestDistance] = [name, distance];
  }
  return best;
}

/** Levenshtein distance: the fewest one-character insertions, deletions or substitutions from a to b. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = row;
  }
  return previous[b.length];
}
