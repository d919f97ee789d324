// Vite builds, Vitest config.
//
//   vite build                      src/chat.ts -> ../static/chat.js + chat.js.map (the page's bundle)
//   vite build --mode textpatch-cli tests/textpatch_cli.ts -> <outDir>/textpatch-cli.mjs (Node; the
//                                   cross-language patch checks, see tests/textpatch_cli.ts)
//
// The page bundle has fixed file names (no hashes) and deterministic bytes, so the committed
// files can be compared with a fresh build (`npm run check:static`).
import { defineConfig } from "vitest/config";

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
  return {
    // No index.html and no public/ folder: one script entry, built straight into ../static.
    publicDir: false,
    logLevel: "warn",
    build: {
      outDir: "../static",
      // static/ also holds the hand-written chat.css: never wipe it.
      emptyOutDir: false,
      target: "es2020",
      sourcemap: true,
      minify: true,
      modulePreload: false,
      reportCompressedSize: false,
      copyPublicDir: false,
      rolldownOptions: {
        input: "src/chat.ts",
        output: {
          format: "es",
          entryFileNames: "chat.js",
          // Everything in one file: the page loads exactly static/chat.js.
          codeSplitting: false,
        },
      },
    },
    test: {
      include: ["tests/**/*.test.ts"],
      environment: "node",
    },
  };
});
