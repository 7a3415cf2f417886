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
}

export function docFiles(): string[] {
  return ['README.md', ...readdirSync(join(ROOT, 'docs')).map((f) => `docs/${f}`)].filter((f) => f.endsWith('.md'));
}

/** The blocks fenced ```LANG, in file order; those marked `no-run` left out unless asked for. */
export function docBlocks(lang: string, opts: { withNoRun?: boolean } = {}): DocBlock[] {
  const out: DocBlock[] = [];
  for (const file of docFiles()) {
    const text = readFileSync(join(ROOT, file), 'utf8');
    for (const m of text.matchAll(new RegExp(`^\`\`\`${lang}([^\\n]*)\\n([\\s\\S]*?)^\`\`\`$`, 'gm'))) {
      const info = m[1]!.trim();
      if (/\bno-run\b/.test(info) && !opts.withNoRun) continue;
      const line = text.slice(0, m.index).split('\n').length;
      out.push({ file, line, code: m[2]!, name: `${file.replace(/[/.]/g, '_')}_${line}`, info });
    }
  }
  return out;
}
