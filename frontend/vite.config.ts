// Vite builds, Vitest config.
//
//   vite build                      src/chat.ts -> ../static/chat.js + chat.js.map (the chat page)
//   vite build --mode latency       src/latency.ts -> ../static/latency.js + latency.js.map +
//                                   latency.css (uPlot's CSS and the dashboard's, imported by it)
//   vite build --mode panel         src/panel.ts -> ../static/panel.js + panel.js.map (the widget's panel),
//                                   and panel-textpatch.js (+ .map), loaded by a templated send
//   vite build --mode console       src/console.ts -> ../static/console.js + console.js.map (the agent
//                                   console, /agent/)
//   vite build --mode widget        src/widget.ts -> ../static/widget.js + widget.js.map (the loader a
//                                   website includes; a classic script)
//   vite build --mode textpatch-cli tests/textpatch_cli.ts -> <outDir>/textpatch-cli.mjs (Node; the
//                                   cross-language patch checks, see tests/textpatch_cli.ts)
//
// `npm run build` runs the first five. Page bundles have fixed file names (no hashes) and
// deterministic bytes, so the committed files can be compared with a fresh build
// (`npm run check:static`). Each page is its own build: one input per build is what lets
// everything (code and CSS) land in one file per page.
import type { UserConfig } from "vite";
import { defineConfig } from "vitest/config";

function pageBuild(entry: string, name: string, format: "es" | "iife" = "es", split = false): UserConfig {
  return {
    // No index.html and no public/ folder: one script entry, built straight into ../static.
    publicDir: false,
    logLevel: "warn",
    build: {
      outDir: "../static",
      // static/ also holds the hand-written chat.css and the other page's bundle: never wipe it.
      emptyOutDir: false,
      target: "es2020",
      sourcemap: true,
      minify: true,
      modulePreload: false,
      reportCompressedSize: false,
      copyPublicDir: false,
      cssCodeSplit: false,
      rolldownOptions: {
        input: entry,
        output: {
          format,
          entryFileNames: `${name}.js`,
          assetFileNames: `${name}[extname]`,
          // Everything in one file: the page loads exactly static/<name>.js. `split`: what
          // it imports dynamically is a chunk of its own, static/<name>-<module>.js.
          codeSplitting: split,
          chunkFileNames: `${name}-[name].js`,
        },
      },
    },
  };
}

export default defineConfig(({ mode }) => {
  if (mode === "textpatch-cli") {
    return {
      publicDir: false,
      logLevel: "warn",
      ssr: { noExternal: true },
      build: {
        ssr: "tests/textpatch_cli.ts",
        outDir: "node_modules/.cache/textpatch-cli",
        emptyOutDir: true,
        target: "node20",
        minify: false,
        rolldownOptions: { output: { format: "es", entryFileNames: "textpatch-cli.mjs" } },
      },
    };
  }
  if (mode === "latency") {
    return pageBuild("src/latency.ts", "latency");
  }
  if (mode === "panel") {
    return pageBuild("src/panel.ts", "panel", "es", true);
  }
  if (mode === "console") {
    return pageBuild("src/console.ts", "console");
  }
  if (mode === "widget") {
    // A classic script (the host page's snippet has no type="module"; `document.currentScript`
    // is null in a module).
    return pageBuild("src/widget.ts", "widget", "iife");
  }
  return {
    ...pageBuild("src/chat.ts", "chat"),
    test: {
      include: ["tests/**/*.test.ts"],
      environment: "node",
    },
  };
});
