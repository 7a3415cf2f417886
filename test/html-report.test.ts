/**
 * The HTML replay report opened in a real browser: Debian's chromium, headless, driven by
 * playwright-core, with a fresh profile and no network. The report of a fixture must open with
 * no console error and no request beyond the file itself, every chart must have drawn its data,
 * and the numbers on the page must be the text report's (same command run, same cells). A
 * screenshot of each page goes to test-output/ (gitignored) for a person to look at.
 */
import { expect } from 'chai';
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { runNode, type Run } from './helpers/run.js';

const ROOT = new URL('..', import.meta.url).pathname;
const BIN = join(ROOT, 'bin/callgate.js');
const FIX = join(ROOT, 'fixtures');
const OUT = join(ROOT, 'test-output');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** The colours the page draws data in (admitted / dispatched, window counts, wait max). */
const DATA_COLORS = [
  [0x2a, 0x9d, 0x4b],
  [0x2a, 0x6f, 0xdb],
  [0xd6, 0x28, 0x28],
];

async function callgate(args: string[]): Promise<Run> {
  const r = await runNode([BIN, ...args], { cwd: ROOT });
  expect(r.code, r.stderr).to.equal(0);
  return r;
}

/** A table of the text report (header line starting with `first`): cells cut at the dash columns. */
function textTable(text: string, first: string): string[][] {
  const lines = text.split('\n');
  const h = lines.findIndex((l) => l.startsWith(`${first} `));
  expect(h, `table "${first}" in the text report`).to.be.greaterThan(-1);
  const cols: [number, number][] = [];
  for (const m of lines[h + 1]!.matchAll(/-+/g)) cols.push([m.index, m.index + m[0].length]);
  const rows: string[][] = [];
  for (const l of lines.slice(h + 2)) {
    if (l.trim() === '') break;
    rows.push(cols.map(([a, b]) => l.slice(a, b).trim()));
  }
  return rows;
}

interface Opened {
  page: Page;
  errors: string[];
  requests: string[];
}

interface ChartInfo {
  title: string;
  dataPixels: number;
  width: number;
}

/** For every chart: its title and how many pixels are in a data colour (antialiasing allowed). */
function charts(page: Page): Promise<ChartInfo[]> {
  return page.evaluate((colors) => {
    return [...document.querySelectorAll('.uplot')].map((u) => {
      const canvas = u.querySelector('canvas')!;
      // read a copy: reading the page's own canvas back makes Chromium warn on the console
      const copy = document.createElement('canvas');
      copy.width = canvas.width;
      copy.height = canvas.height;
      const cx = copy.getContext('2d', { willReadFrequently: true })!;
      cx.drawImage(canvas, 0, 0);
      const { data } = cx.getImageData(0, 0, copy.width, copy.height);
      let n = 0;
      for (let i = 0; i < data.length; i += 4) {
        if (data[i + 3]! < 128) continue;
        for (const [r, g, b] of colors) {
          if (Math.abs(data[i]! - r!) + Math.abs(data[i + 1]! - g!) + Math.abs(data[i + 2]! - b!) < 60) {
            n++;
            break;
          }
        }
      }
      return { title: u.querySelector('.u-title')?.textContent ?? '', dataPixels: n, width: canvas.width };
    });
  }, DATA_COLORS);
}

function tableCells(page: Page, id: string): Promise<string[][]> {
  return page.evaluate(
    (id) =>
      [...document.querySelectorAll(`#${id} tbody tr`)].map((tr) =>
        [...tr.querySelectorAll('td')].map((td) => td.textContent.trim()),
      ),
    id,
  );
}

function expectAllDrew(list: ChartInfo[]): void {
  for (const c of list) {
    expect(c.width, c.title).to.be.greaterThan(300);
    expect(c.dataPixels, `chart "${c.title}" drew its data`).to.be.greaterThan(20);
  }
}

describe('HTML replay report in headless Chromium', function () {
  this.timeout(120_000);
  let ctx: BrowserContext;
  let profile: string;
  let dir: string;

  before(async () => {
    if (!existsSync(CHROMIUM))
      throw new Error(`no browser at ${CHROMIUM}: apt-get install chromium (.ci/run installs it when missing)`);
    mkdirSync(OUT, { recursive: true });
    dir = mkdtempSync(join(tmpdir(), 'callgate-html-'));
    profile = mkdtempSync(join(tmpdir(), 'callgate-chromium-'));
    ctx = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: FLAGS,
      viewport: { width: 1280, height: 900 },
    });
    // no network: anything but the report file itself is refused (and recorded below)
    await ctx.route(/^(?!file:)/, (route) => route.abort());
  });

  after(async () => {
    await ctx?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function open(file: string): Promise<Opened> {
    const page = await ctx.newPage();
    const errors: string[] = [];
    const requests: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') errors.push(`${m.type()}: ${m.text()}`);
    });
    page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
    page.on('request', (r) => {
      if (!r.url().startsWith('file:')) requests.push(r.url());
    });
    await page.goto(pathToFileURL(file).href);
    await page.waitForSelector('body[data-ready="1"]', { timeout: 20_000 });
    return { page, errors, requests };
  }

  it('campaign: every chart drew, the tables are the text report’s, no error, no network', async () => {
    const html = join(dir, 'campaign.html');
    const r = await callgate([
      'replay',
      '--config',
      join(FIX, 'campaign.config.json'),
      '--trace',
      join(FIX, 'campaign.trace.csv'),
      '--html',
      html,
    ]);
    expect(statSync(html).size).to.be.lessThan(1_000_000);
    const { page, errors, requests } = await open(html);

    const list = await charts(page);
    // all inbound, all outbound; account (rate + 1 window); busiest peer (rate + 2 windows); carrier (rate + wait)
    expect(list.map((c) => c.title.split(':')[0])).to.deep.equal([
      'offered / admitted / rejected',
      'offered / dispatched / rejected / rerouted',
      'account',
      'account',
      'peer',
      'peer',
      'peer',
      'A',
      'A',
    ]);
    expectAllDrew(list);
    expect(list[4]!.title).to.match(/^peer:sbc-callbacks: offered/);
    expect(list[6]!.title).to.match(/60\/1m — busiest: 52 in 2024-03-05 15:01:44\.109 – 2024-03-05 15:02:44\.109$/);

    // the numbers shown are the text report's, cell for cell
    const text = r.stdout;
    expect((await page.textContent('#summary'))!.trim()).to.equal(text.split('\n').slice(0, 3).join('\n'));
    expect((await page.textContent('#verdict'))!.trim()).to.equal('Every limit held in every window.');
    const levels = await tableCells(page, 'levels-table');
    expect(levels.map((row) => row.slice(0, 7))).to.deep.equal(textTable(text, 'level'));
    expect(await tableCells(page, 'carriers-table')).to.deep.equal(textTable(text, 'carrier'));
    expect(textTable(text, 'carrier')).to.have.length(5);

    // any peer and any carrier by the selector
    const options = await page.locator('#carriers select option').allTextContents();
    expect(options.map((o) => o.split(' ')[0])).to.deep.equal(['A', 'B', 'C', 'E', 'D']); // busiest first
    await page.selectOption('#carriers select', { index: 4 });
    const afterCarrier = await charts(page);
    expect(afterCarrier.slice(-2).map((c) => c.title.split(':')[0])).to.deep.equal(['D', 'D']);
    expectAllDrew(afterCarrier);

    await page.screenshot({ path: join(OUT, 'html-report-campaign.png'), fullPage: true });
    expect(errors).to.deep.equal([]);
    expect(requests).to.deep.equal([]);
    await page.close();
  });

  it('channels: calls in progress drawn against the limit, the channels table the text report’s', async () => {
    const { writeFileSync, readFileSync } = await import('node:fs');
    const cfg = JSON.parse(readFileSync(join(FIX, 'campaign.config.json'), 'utf8')) as {
      maxCallDuration?: string;
      inbound: { peers: Record<string, unknown[]> };
      outbound: { carriers: Record<string, { channels?: number }> };
    };
    cfg.maxCallDuration = 'PT20S';
    cfg.inbound.peers['sbc-callbacks']!.push({ channels: 5 });
    cfg.outbound.carriers.A!.channels = 6;
    const config = join(dir, 'channels.config.json');
    writeFileSync(config, JSON.stringify(cfg));
    const html = join(dir, 'channels.html');
    const r = await callgate([
      'replay',
      '--config',
      config,
      '--trace',
      join(FIX, 'campaign.trace.csv'),
      '--html',
      html,
    ]);
    const { page, errors, requests } = await open(html);
    const peer = (await charts(page)).filter((c) => c.title.startsWith('peer:sbc-callbacks: calls in progress'));
    expect(peer.map((c) => c.title)).to.deep.equal([
      'peer:sbc-callbacks: calls in progress, against 5 channels — most at once: 5',
    ]);
    const labels = await page.locator('#carriers select option').allTextContents();
    await page.selectOption('#carriers select', { index: labels.findIndex((l) => l.startsWith('A ')) });
    const list = await charts(page);
    expect(list.filter((c) => c.title.startsWith('A: calls in progress')).map((c) => c.title)).to.deep.equal([
      'A: calls in progress, against 6 channels — most at once: 6',
    ]);
    expectAllDrew(list);
    expect(await tableCells(page, 'channels-table')).to.deep.equal(textTable(r.stdout, 'level / carrier'));
    expect(textTable(r.stdout, 'level / carrier')).to.deep.equal([
      ['peer:sbc-callbacks', '5', '5', 'held'],
      ['carrier A', '6', '6', 'held'],
    ]);
    await page.screenshot({ path: join(OUT, 'html-report-channels.png'), fullPage: true });
    expect(errors).to.deep.equal([]);
    expect(requests).to.deep.equal([]);
    await page.close();
  });

  it('ids that look like markup are shown as text, never run', async () => {
    const { writeFileSync } = await import('node:fs');
    const evil = '</script><script>alert(1)</script>';
    const bold = '<b onmouseover="alert(2)">x</b> & "q"';
    const trace = join(dir, 'evil.csv');
    const config = join(dir, 'evil.json');
    const rows = ['time,call_id,direction,peer,account,route'];
    for (let i = 0; i < 40; i++)
      rows.push(`${1_700_000_000 + i / 10},c${i},in,"${(i % 2 ? evil : bold).replace(/"/g, '""')}",,`);
    rows.push(`1700000005,o1,out,,,"${evil.replace(/"/g, '""')}"`);
    writeFileSync(trace, `${rows.join('\n')}\n`);
    writeFileSync(
      config,
      JSON.stringify({
        inbound: { peers: { [evil]: [{ limit: 3, window: 'PT1S' }], [bold]: [{ limit: 4, window: 'PT1S' }] } },
        outbound: { carriers: { [evil]: { cps: 1 } } },
      }),
    );
    const html = join(dir, 'evil.html');
    const r = await callgate(['replay', '--config', config, '--trace', trace, '--html', html]);
    const { page, errors, requests } = await open(html);
    const dialogs: string[] = [];
    page.on('dialog', (d) => {
      dialogs.push(d.message());
      void d.dismiss();
    });
    const peers = await page.locator('#levels-peers select option').allTextContents();
    expect(peers.map((o) => o.split(' — ')[0]).sort()).to.deep.equal([`peer:${bold}`, `peer:${evil}`].sort());
    expect((await tableCells(page, 'levels-table')).map((row) => row.slice(0, 7))).to.deep.equal(
      textTable(r.stdout, 'level'),
    );
    expect((await tableCells(page, 'carriers-table'))[0]![0]).to.equal(evil);
    await page.hover('#levels-table');
    expectAllDrew(await charts(page));
    expect(dialogs).to.deep.equal([]);
    expect(await page.locator('b').count()).to.equal(0);
    expect(errors).to.deep.equal([]);
    expect(requests).to.deep.equal([]);
    await page.close();
  });

  it('a what-if report: its tables are the text report’s what-if section', async () => {
    const html = join(dir, 'whatif.html');
    const newConfig = join(dir, 'new.config.json');
    const { writeFileSync, readFileSync } = await import('node:fs');
    const cfg = JSON.parse(readFileSync(join(FIX, 'autodialer.config.json'), 'utf8')) as {
      inbound: { global: unknown; peers: Record<string, unknown> };
    };
    cfg.inbound.global = [{ limit: 50, window: 'PT1S' }];
    cfg.inbound.peers['dialer-9'] = [{ limit: 8, window: 'PT1S' }];
    writeFileSync(newConfig, JSON.stringify(cfg));
    const r = await callgate([
      'replay',
      '--config',
      newConfig,
      '--compare',
      join(FIX, 'autodialer.config.json'),
      '--trace',
      join(FIX, 'autodialer.trace.csv'),
      '--html',
      html,
    ]);
    const { page, errors, requests } = await open(html);

    const list = await charts(page);
    expect(list[0]!.title).to.match(/^What-if: inbound admitted per second, old against new configuration/);
    expectAllDrew(list);
    // global (rate + window) and the peer dialer-9, now with one limit: 2 + 2 + the inbound total + the what-if
    expect(list).to.have.length(6);

    const text = r.stdout.split('\n');
    const w = text.indexOf(text.find((l) => l.startsWith('What-if: '))!);
    expect((await page.textContent('#whatif-summary'))!.trim()).to.equal(text[w + 1]);
    expect(text[w + 1]).to.match(/^572 of 3078 calls decided differently/);
    const totals = text.slice(w + 4, text.indexOf('', w + 4)).map((l) => {
      const m = /^(.*?)\s+(-?\d+)\s+(-?\d+)\s+(\S+)$/.exec(l)!;
      return [m[1]!.trim(), m[2], m[3], m[4]];
    });
    expect(await tableCells(page, 'whatif-totals')).to.deep.equal(totals);
    const groupLines = text
      .slice(text.indexOf('Calls decided differently (old decision → new decision: calls, first calls)') + 1)
      .filter((l) => /^ {2}(in |out)/.test(l));
    const groups = (await tableCells(page, 'whatif-groups')).map(([dir, from, to, n, calls]) => {
      const shown = calls!.split(', ');
      return `  ${dir === 'in' ? 'in ' : 'out'}  ${from} → ${to}: ${n} (${shown.join(', ')}${Number(n) > shown.length ? ', …' : ''})`;
    });
    expect(groupLines.length).to.equal(25);
    expect(groups.slice(0, 25)).to.deep.equal(groupLines);
    expect(await page.locator('#whatif-calls tbody tr').count()).to.equal(572);

    await page.screenshot({ path: join(OUT, 'html-report-whatif.png'), fullPage: true });
    expect(errors).to.deep.equal([]);
    expect(requests).to.deep.equal([]);
    await page.close();
  });
});
