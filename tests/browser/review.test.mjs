// The HTML review files of `cassette diff --html` and `cassette run --html`, opened in Debian's
// headless Chromium through playwright-core: they render (a screenshot that is not blank), the
// filters work without scripts, no request leaves the page, and hostile cassette text runs
// nothing (with the page's own Content-Security-Policy, and without it: the escaping alone).
//
// Run by scripts/test.sh: `node --test tests/browser/` with CASSETTE_BIN set to the binary under
// test and Chromium at /usr/bin/chromium (CHROMIUM to use another).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const bin = process.env.CASSETTE_BIN || join(root, 'target', 'debug', 'cassette');
const browserPath = process.env.CHROMIUM || '/usr/bin/chromium';

/** Text that would break out of HTML, an attribute, a URL or a style sheet. */
const HOSTILE = [
  '</pre></script><script>window.pwned = 1; alert(1)</script>',
  '<img src=x onerror="window.pwned = 2; fetch(\'http://127.0.0.1:9/leak\')">',
  '" autofocus onfocus="window.pwned = 3" x="',
  "' onmouseover='window.pwned = 4' '",
  '<a href="javascript:window.pwned = 5">click me</a>',
  '<style>*{display:none !important} body{background:url(http://127.0.0.1:9/css)}</style>',
  '<iframe src="http://127.0.0.1:9/frame"></iframe><link rel=stylesheet href=http://127.0.0.1:9/s.css>',
].join(' ');

let work;
let upstream;
let upstreamUrl;
let hits = 0;
let browser;
let pages = {};

/** A fake OpenAI-compatible upstream: "You said: PROMPT" (plus a variant), or a tool call. */
function startUpstream() {
  let variant = '';
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      hits += 1;
      const request = JSON.parse(body || '{}');
      const user = (request.messages || []).filter((m) => m.role === 'user').pop();
      const prompt = user ? user.content : '';
      const weather = /weather in (\w+)/i.exec(prompt);
      const message = request.tools && weather
        ? { role: 'assistant', content: null, tool_calls: [{ id: `call_${hits}`, type: 'function', function: { name: 'get_weather', arguments: JSON.stringify({ city: weather[1] }) } }] }
        : { role: 'assistant', content: `You said: ${prompt}${variant}` };
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({
        id: `chatcmpl-${hits}`, object: 'chat.completion', created: 1700000000, model: `${request.model}-2024-01-01`,
        choices: [{ index: 0, message, finish_reason: message.tool_calls ? 'tool_calls' : 'stop' }],
        usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
      }));
    });
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      resolve({ server, url: `http://127.0.0.1:${server.address().port}`, setVariant: (v) => (variant = v) });
    });
  });
}

/** Runs the binary (asynchronously: the fake upstream answers from this same process). */
async function cassette(args, { allow = [0] } = {}) {
  const env = { ...process.env };
  for (const name of ['CASSETTE_MODE', 'CASSETTE_STORE', 'CASSETTE_CONFIG', 'GITHUB_STEP_SUMMARY', 'UPSTREAM_API_KEY', 'OPENAI_API_KEY']) {
    delete env[name];
  }
  const child = spawn(bin, args, { cwd: work, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const status = await new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', resolve);
  });
  assert.ok(allow.includes(status), `cassette ${args.join(' ')} exited ${status}\n${stdout}\n${stderr}`);
  return { status, stdout, stderr };
}

function suiteLine(id, system, prompt, extra = {}) {
  return JSON.stringify({ id, prompt, params: { model: 'm', temperature: 0, system }, grader: 'contains', expect: { needle: 'said' }, ...extra });
}

function weatherLine(id, system, city) {
  return JSON.stringify({
    id, grader: 'tool_called', expect: { name: 'get_weather' },
    request: { path: '/v1/chat/completions', body: { model: 'm', temperature: 0,
      tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } }],
      messages: [{ role: 'system', content: system }, { role: 'user', content: `What is the weather in ${city}?` }] } },
  });
}

async function record(name, lines, store) {
  writeFileSync(join(work, name), lines.join('\n'));
  await cassette(['run', name, '--mode', 'record', '--store', store, '--upstream', upstreamUrl]);
}

before(async () => {
  work = mkdtempSync(join(tmpdir(), 'cassette-browser-'));
  const up = await startUpstream();
  upstream = up.server;
  upstreamUrl = up.url;
  // Before: 30 cases, one hostile; after: the system prompt edited (every key moves), the
  // answers reworded, one tool call's arguments changed.
  const before = [];
  const after = [];
  for (let i = 0; i < 30; i++) {
    before.push(suiteLine(`case-${i}`, 'Be brief.', `Question number ${i}: say something.`));
    after.push(suiteLine(`case-${i}`, 'Be brief and kind.', `Question number ${i}: say something.`));
  }
  before.push(suiteLine('hostile', 'Be brief.', HOSTILE));
  after.push(suiteLine('hostile', 'Be brief and kind.', HOSTILE));
  before.push(weatherLine('weather', 'Be brief.', 'Rome'));
  after.push(weatherLine('weather', 'Be brief and kind.', 'Paris'));
  await record('before.jsonl', before, 'file://a');
  // Half the answers reworded: the other half stay the same.
  up.setVariant('');
  await record('after-same.jsonl', after.filter((_, i) => i % 2 === 0), 'file://b');
  up.setVariant(' Indeed.');
  await record('after-reworded.jsonl', after.filter((_, i) => i % 2 === 1), 'file://b');
  await cassette(['diff', 'file://a', 'file://b', '--html', 'diff.html'], { allow: [1] });
  // A run with a miss (a case never recorded) and a failure.
  writeFileSync(join(work, 'run.jsonl'), [
    suiteLine('case-0', 'Be brief.', 'Question number 0: say something.'),
    suiteLine('failing', 'Be brief.', 'Question number 1: say something.', { expect: { needle: 'no such words' } }),
    suiteLine('never-recorded', 'Be brief.', 'A question nobody asked before.'),
    suiteLine('hostile', 'Be brief.', HOSTILE),
  ].join('\n'));
  await cassette(['run', 'run.jsonl', '--store', 'file://a', '--html', 'run.html'], { allow: [2] });
  pages = {
    diff: join(work, 'diff.html'),
    run: join(work, 'run.html'),
  };
  // playwright-core gives each launch a fresh profile folder (--user-data-dir) of its own.
  browser = await chromium.launch({
    executablePath: browserPath,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
});

after(async () => {
  if (browser) await browser.close();
  if (upstream) upstream.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

/**
 * Opens `file` in a fresh page and watches it: every request besides the page itself, every
 * console message and page error, every dialog (alert) opened.
 */
async function open(file, { javaScript = true } = {}) {
  const context = await browser.newContext({ javaScriptEnabled: javaScript, viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  // Closed with the browser at the end, the context is gone already: nothing to reject about.
  page.on('close', () => context.close().catch(() => {}));
  const url = pathToFileURL(file).href;
  const seen = { requests: [], console: [], errors: [], dialogs: [] };
  page.on('request', (r) => { if (r.url() !== url) seen.requests.push(r.url()); });
  page.on('console', (m) => seen.console.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => seen.errors.push(String(e)));
  page.on('dialog', async (d) => { seen.dialogs.push(d.message()); await d.dismiss(); });
  await page.goto(url, { waitUntil: 'load' });
  return { page, seen, url };
}

/** How many pixels of a PNG screenshot differ from its top-left pixel, decoded by the browser. */
async function inkedPixels(page, png) {
  const probe = await browser.newPage();
  await probe.goto('about:blank');
  const dataUrl = `data:image/png;base64,${png.toString('base64')}`;
  const count = await probe.evaluate(async (src) => {
    const img = new Image();
    img.src = src;
    await img.decode();
    const canvas = document.createElement('canvas');
    canvas.width = img.width;
    canvas.height = img.height;
    const ctx = canvas.getContext('2d');
    ctx.drawImage(img, 0, 0);
    const data = ctx.getImageData(0, 0, img.width, img.height).data;
    let inked = 0;
    for (let i = 0; i < data.length; i += 4) {
      if (Math.abs(data[i] - data[0]) + Math.abs(data[i + 1] - data[1]) + Math.abs(data[i + 2] - data[2]) > 30) inked++;
    }
    return inked;
  }, dataUrl);
  await probe.close();
  return count;
}

test('the diff review renders, and nothing leaves the page', async () => {
  const { page, seen } = await open(pages.diff);
  const shot = await page.screenshot({ fullPage: false });
  writeFileSync(join(tmpdir(), 'cassette-diff-review.png'), shot);
  assert.ok(await inkedPixels(page, shot) > 5000, 'the screenshot is blank');
  assert.equal(await page.locator('h1').textContent(), 'cassette diff');
  assert.equal(await page.locator('details.item').count(), 32);
  assert.deepEqual(seen.requests, [], 'requests left the page');
  assert.deepEqual(seen.dialogs, []);
  assert.deepEqual(seen.errors, []);
  assert.deepEqual(seen.console, [], 'a console message (a policy violation?)');
  assert.equal(await page.evaluate(() => window.pwned), undefined);
  await page.close();
});

test('the most severe verdict comes first and pairs show both answers side by side', async () => {
  const { page } = await open(pages.diff);
  const verdicts = await page.locator('details.item .badge').allTextContents();
  assert.equal(verdicts[0], 'changed');
  const order = ['changed', 'removed', 'added', 'reworded', 'same'];
  const ranks = verdicts.map((v) => order.indexOf(v));
  assert.deepEqual(ranks, [...ranks].sort((a, b) => a - b), `not sorted: ${verdicts}`);
  assert.ok(verdicts.includes('reworded') && verdicts.includes('same'), String(verdicts));
  const changed = page.locator('details.item.v-changed').first();
  await changed.evaluate((d) => { d.open = true; });
  const text = await changed.textContent();
  assert.match(text, /tool call arguments \(get_weather\)/);
  assert.match(text, /Request difference/);
  assert.match(text, /Rome/);
  assert.match(text, /Paris/);
  assert.equal(await changed.locator('.pair > section').count(), 2);
  await page.close();
});

test('the changed-only filter hides unchanged pairs, with scripts off', async () => {
  const { page, seen } = await open(pages.diff, { javaScript: false });
  const visible = async (selector) => {
    const all = await page.locator(selector).all();
    let n = 0;
    for (const item of all) if (await item.isVisible()) n++;
    return n;
  };
  const same = await page.locator('details.item.v-same').count();
  const reworded = await page.locator('details.item.v-reworded').count();
  assert.ok(same > 0 && reworded > 0, `${same} same, ${reworded} reworded`);
  assert.equal(await visible('details.item.v-same'), same);
  await page.locator('label[for="show-changed"]').click();
  assert.equal(await visible('details.item.v-same'), 0, 'same pairs still shown');
  assert.equal(await visible('details.item.v-reworded'), 0, 'reworded pairs still shown');
  assert.equal(await visible('details.item.v-changed'), await page.locator('details.item.v-changed').count());
  await page.locator('label[for="show-differences"]').click();
  assert.equal(await visible('details.item.v-same'), 0);
  assert.equal(await visible('details.item.v-reworded'), reworded);
  await page.locator('label[for="show-all"]').click();
  assert.equal(await visible('details.item.v-same'), same);
  assert.deepEqual(seen.requests, []);
  await page.close();
});

test('the run review shows misses with their explanation and filters failures', async () => {
  const { page, seen } = await open(pages.run);
  const shot = await page.screenshot();
  assert.ok(await inkedPixels(page, shot) > 5000, 'the screenshot is blank');
  const verdicts = await page.locator('details.item .badge').allTextContents();
  assert.deepEqual(verdicts, ['miss', 'fail', 'pass', 'pass']);
  const miss = page.locator('details.item.v-miss').filter({ hasText: 'never-recorded' });
  assert.match(await miss.textContent(), /Replay miss/);
  assert.match(await miss.textContent(), /nearest/);
  await page.locator('label[for="show-failures"]').click();
  for (const pass of await page.locator('details.item.v-pass').all()) {
    assert.equal(await pass.isVisible(), false);
  }
  assert.equal(await page.locator('details.item.v-fail').isVisible(), true);
  assert.deepEqual(seen.requests, []);
  assert.deepEqual(seen.dialogs, []);
  assert.deepEqual(seen.console, []);
  await page.close();
});

test('hostile tape text runs nothing, even without the page policy', async () => {
  for (const file of [pages.diff, pages.run]) {
    const html = readFileSync(file, 'utf8');
    assert.ok(html.includes("default-src 'none'"));
    // The escaping alone: the same page without its Content-Security-Policy.
    const bare = file.replace('.html', '-no-policy.html');
    writeFileSync(bare, html.replace(/<meta http-equiv="Content-Security-Policy"[^>]*>/, ''));
    for (const target of [file, bare]) {
      const { page, seen } = await open(target);
      await page.locator('details.item').evaluateAll((all) => all.forEach((d) => { d.open = true; }));
      // Hover and focus everything a hostile attribute could hang on.
      await page.mouse.move(200, 300);
      await page.keyboard.press('Tab');
      const hostile = page.locator('details.item').filter({ hasText: 'window.pwned = 1' }).first();
      assert.ok(await hostile.count() > 0, `${target}: the hostile text is not shown as text`);
      assert.equal(await page.evaluate(() => window.pwned), undefined, target);
      assert.equal(await page.locator('script, img, iframe, link[rel=stylesheet], a[href^="javascript"]').count(), 0, target);
      assert.equal(await page.locator('style').count(), 1, target);
      assert.equal(await page.locator('body').isVisible(), true, `${target}: a tape's style sheet hid the page`);
      assert.deepEqual(seen.requests, [], target);
      assert.deepEqual(seen.dialogs, [], target);
      assert.deepEqual(seen.errors, [], target);
      await page.close();
    }
  }
});

test('the page policy blocks what escaping would have let in', async () => {
  // A script and an image planted in the page (as if escaping had failed) are refused.
  let leaked = 0;
  const trap = createServer((req, res) => { leaked++; res.end('x'); });
  await new Promise((resolve) => trap.listen(0, '127.0.0.1', resolve));
  const port = trap.address().port;
  const planted = readFileSync(pages.diff, 'utf8').replace('<body>',
    `<body><script>window.pwned = 9</script><img src="http://127.0.0.1:${port}/img"><link rel="stylesheet" href="http://127.0.0.1:${port}/css"><div style="color:red" id="styled">x</div>`);
  const file = join(work, 'planted.html');
  writeFileSync(file, planted);
  const { page, seen } = await open(file);
  await page.waitForTimeout(300);
  assert.equal(await page.evaluate(() => window.pwned), undefined, 'the planted script ran');
  assert.equal(leaked, 0, 'the planted image or style sheet was fetched');
  assert.equal(await page.locator('#styled').evaluate((e) => getComputedStyle(e).color), 'rgb(31, 35, 40)',
    'an inline style attribute applied');
  assert.ok(seen.console.some((m) => m.includes('Content Security Policy')), String(seen.console));
  await page.close();
  trap.close();
});
