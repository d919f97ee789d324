// The longest patch the server takes (chatapp/prompts/textpatch.py); apart from
// textpatch.ts so that knowing it does not load diff-match-patch.
export const MAX_PATCH_CHARS = 16_000;
