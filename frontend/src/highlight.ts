// Code highlighting for the chat page: highlight.js's core and a few common languages (each one
// adds 1-8 kB to the bundle), installed with markdown.ts's `useHighlighter`. The widget's panel
// leaves it out (about 17 kB gzipped).

import hljs from "highlight.js/lib/core";
import bash from "highlight.js/lib/languages/bash";
import diff from "highlight.js/lib/languages/diff";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";
import python from "highlight.js/lib/languages/python";
import sql from "highlight.js/lib/languages/sql";
import typescript from "highlight.js/lib/languages/typescript";
import xml from "highlight.js/lib/languages/xml";
import yaml from "highlight.js/lib/languages/yaml";

hljs.registerLanguage("bash", bash);
hljs.registerLanguage("diff", diff);
hljs.registerLanguage("javascript", javascript);
hljs.registerLanguage("json", json);
hljs.registerLanguage("python", python);
hljs.registerLanguage("sql", sql);
hljs.registerLanguage("typescript", typescript);
hljs.registerLanguage("xml", xml);
hljs.registerLanguage("yaml", yaml);

export function highlightCode(code: string, language: string): string | null {
  if (hljs.getLanguage(language) === undefined) return null;
  return hljs.highlight(code, { language, ignoreIllegals: true }).value;
}
