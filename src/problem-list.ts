/**
 * The one cap on how many problems an error lists: a file with 200,000 bad entries must give a
 * screenful, not 200,000 lines. ConfigError and TraceError both list their problems this way.
 */

/** Problems shown in full; the rest are only counted. */
export const SHOWN_PROBLEMS = 20;

/**
 * The first SHOWN_PROBLEMS lines, then `… and N more problems` when there are more. `total` is
 * the number of problems found, when `lines` holds only some of them (a reader that stopped
 * keeping problems after a while but went on counting).
 */
export function capProblems(lines: readonly string[], total = lines.length): string[] {
  const shown = lines.slice(0, SHOWN_PROBLEMS);
  const more = Math.max(total, lines.length) - shown.length;
  if (more > 0) shown.push(`… and ${more} more problem${more === 1 ? '' : 's'}`);
  return shown;
}
