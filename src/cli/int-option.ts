/**
 * An integer option of the command line, as commander parses it: a number when the text is
 * whole digits (and a safe integer), else the text itself, typed as a number (every check fails
 * on it, and the message quotes what the user typed, not NaN).
 */
export const intOption = (v: string): number =>
  /^\d+$/.test(v) && Number.isSafeInteger(Number(v)) ? Number(v) : (v as unknown as number);

/** An option's value in a message: a number as it is, a text quoted. */
export const shownOption = (v: unknown): string => (typeof v === 'string' ? JSON.stringify(v) : String(v));
