/** The fenced code blocks of README.md and docs/*.md, by language, for the tests that run them. */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = new URL('../..', import.meta.url).pathname;

export interface DocBlock {
  /** README.md or docs/NAME.md. */
  readonly file: string;
  /** The line of its opening fence. */
  readonly line: number;
  readonly code: string;
  /** A file-name-safe name: README_md_142. */
  readonly name: string;
  /** What follows the language on the fence (`no-run`). */
  readonly info: string;
  /** The output the document shows for it: the next block, when at most a short paragraph comes between. */
  readonly shown?: string;
}

export function docFiles(): string[] {
  return ['README.md', ...readdirSync(join(ROOT, 'docs')).map((f) => `docs/${f}`)].filter((f) => f.endsWith('.md'));
}

/** The blocks fenced ```LANG, in file order; those marked `no-run` left out unless asked for. */
export function docBlocks(lang: string, opts: { withNoRun?: boolean } = {}): DocBlock[] {
  const out: DocBlock[] = [];
  for (const file of docFiles()) {
    const text = readFileSync(join(ROOT, file), 'utf8');
    const all = [...text.matchAll(/^```([^\n]*)\n([\s\S]*?)^```$/gm)];
    all.forEach((m, i) => {
      const [language = '', ...rest] = m[1]!.trim().split(/\s+/);
      if (language !== lang) return;
      const info = rest.join(' ');
      if (/\bno-run\b/.test(info) && !opts.withNoRun) return;
      const line = text.slice(0, m.index).split('\n').length;
      const next = all[i + 1];
      const between = next ? text.slice(m.index + m[0].length, next.index).trim() : '';
      const shown =
        next && ['', 'json', 'text'].includes(next[1]!.trim()) && between.split('\n').length <= 4 ? next[2] : undefined;
      out.push({
        file,
        line,
        code: m[2]!,
        name: `${file.replace(/[/.]/g, '_')}_${line}`,
        info,
        ...(shown && { shown }),
      });
    });
  }
  return out;
}
