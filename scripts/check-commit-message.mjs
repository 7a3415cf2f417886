#!/usr/bin/env node
/**
 * The commit message rule (used by .githooks/commit-msg and test/commit-messages.test.ts):
 * a subject line of 1 to 72 characters, then, if there is more, a blank line before the body.
 * Comment lines (#) and a merge's default subject are accepted as git writes them.
 *
 *   node scripts/check-commit-message.mjs FILE     exit 1 with one line per problem
 */
import { readFileSync } from 'node:fs';

export const MAX_SUBJECT = 72;

/** The problems of one commit message (empty: it is fine). */
export function commitMessageProblems(message) {
  const lines = message
    .split('\n')
    .filter((l) => !l.startsWith('#'))
    .map((l) => l.replace(/\s+$/, ''));
  while (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  const problems = [];
  const subject = lines[0] ?? '';
  if (subject.trim() === '') problems.push('the subject line is empty');
  if (subject.length > MAX_SUBJECT)
    problems.push(
      `the subject has ${subject.length} characters; at most ${MAX_SUBJECT} (say what changed; the why goes in the body)`,
    );
  if (lines.length > 1 && lines[1] !== '')
    problems.push('the subject must be followed by a blank line before the body');
  return problems;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const file = process.argv[2];
  if (!file) {
    console.error('usage: check-commit-message.mjs FILE');
    process.exit(2);
  }
  const problems = commitMessageProblems(readFileSync(file, 'utf8'));
  for (const p of problems) console.error(`commit message: ${p}`);
  process.exit(problems.length > 0 ? 1 : 0);
}
