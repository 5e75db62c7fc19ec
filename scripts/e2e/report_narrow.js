// The report at the editor's side-panel width: node report_narrow.js REPORT.html OUT.png (PW=path to playwright-core from make e2e's cache). Prints each table's width against its container's.
const { chromium } = require(process.env.PW);
(async () => {
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
  const page = await browser.newPage({ viewport: { width: 520, height: 900 } });
  await page.goto('file://' + process.argv[2]);
  const widths = await page.evaluate(() => ({ doc: document.documentElement.scrollWidth, view: window.innerWidth,
    tables: [...document.querySelectorAll('table')].map(t => [t.className, t.scrollWidth, t.parentElement.clientWidth]) }));
  console.log(JSON.stringify(widths));
  await page.screenshot({ path: process.argv[3], fullPage: true });
  await browser.close();
})();
