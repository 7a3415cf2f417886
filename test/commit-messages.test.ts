/**
 * The commit message rule (scripts/check-commit-message.mjs, kept by .githooks/commit-msg) holds
 * for every commit after the one that added the hook: a hook can be skipped (--no-verify, or a
 * checkout where `npm install` never set core.hooksPath), the history cannot hide it.
 *
 * Without the history (no git, no repository, a shallow clone that lacks the hook's commit) the
 * test says so in its title: it checks the commits that are there, or is skipped naming why.
 */
import { spawnSync } from 'node:child_process';
import { expect } from 'chai';

const ROOT = new URL('..', import.meta.url).pathname;
/** The commit that added the commit-msg hook: the rule applies to the commits after it. */
const HOOK_COMMIT = 'cf0b6e8';

// a non-literal specifier: the .mjs script has no type declarations (it runs without a build)
const RULE_SCRIPT = new URL('../scripts/check-commit-message.mjs', import.meta.url).href;
const { commitMessageProblems } = (await import(RULE_SCRIPT)) as {
  commitMessageProblems: (message: string) => string[];
};

function git(args: string[]): { ok: boolean; out: string; why: string } {
  const r = spawnSync('git', ['-C', ROOT, ...args], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (r.error) return { ok: false, out: '', why: r.error.message };
  return { ok: r.status === 0, out: r.stdout, why: r.stderr.trim() };
}

interface Commit {
  sha: string;
  message: string;
}

/** The commits of `range`, newest first (`git log -z`: one NUL after each commit). */
function commitsOf(range: string[]): Commit[] {
  const r = git(['log', '-z', '--format=%H%n%B', ...range]);
  if (!r.ok) throw new Error(`git log ${range.join(' ')}: ${r.why}`);
  return r.out
    .split('\0')
    .filter((c) => c.trim() !== '')
    .map((c) => {
      const nl = c.indexOf('\n');
      return { sha: c.slice(0, nl), message: c.slice(nl + 1) };
    });
}

/** Which commits this checkout can check, and how the title says it. */
function plan(): { title: string; range: string[] } | { skip: string } {
  const repo = git(['rev-parse', '--git-dir']);
  if (!repo.ok) return { skip: `no git history here (${repo.why.split('\n')[0]}): no commit message checked` };
  if (git(['rev-parse', '--verify', '--quiet', `${HOOK_COMMIT}^{commit}`]).ok)
    return { title: `every commit after ${HOOK_COMMIT} (the hook's commit)`, range: [`${HOOK_COMMIT}..HEAD`] };
  if (git(['rev-parse', '--is-shallow-repository']).out.trim() === 'true')
    return {
      title: `the commits of this shallow clone only (${HOOK_COMMIT} and the commits before the clone's depth are not here)`,
      range: ['HEAD'],
    };
  return { skip: `${HOOK_COMMIT} (the hook's commit) is not in this history: no commit message checked` };
}

describe('commit messages: a subject of at most 72 characters, then a blank line', () => {
  const p = plan();
  if ('skip' in p) {
    it(`skipped: ${p.skip}`, function () {
      this.skip();
    });
    return;
  }

  it(`${p.title} keeps the rule`, () => {
    const commits = commitsOf(p.range);
    const broken = commits
      .map((c) => ({ c, problems: commitMessageProblems(c.message) }))
      .filter((x) => x.problems.length > 0)
      .map(({ c, problems }) => `${c.sha.slice(0, 10)} "${c.message.split('\n')[0]}": ${problems.join('; ')}`);
    expect(
      broken,
      `${broken.length} of ${commits.length} commits break the rule:\n${broken.join('\n')}\n`,
    ).to.deep.equal([]);
  });

  it('the rule itself: too long a subject, no blank line before the body, an empty message', () => {
    expect(commitMessageProblems(`${'x'.repeat(72)}\n\nwhy`)).to.deep.equal([]);
    expect(commitMessageProblems(`${'x'.repeat(73)}\n\nwhy`)).to.have.length(1);
    expect(commitMessageProblems('subject\nbody at once')).to.have.length(1);
    expect(commitMessageProblems('# only a comment\n\n')).to.deep.equal(['the subject line is empty']);
  });
});
