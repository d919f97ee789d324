// The first questions a new conversation suggests (web/chat.html `#first-questions`, filled
// from the seeded examples): a click asks that question through the form, as if typed.

/** Wire the row, if the page has one; it hides once the first question is sent. */
export function attachFirstQuestions(doc: Document, form: HTMLFormElement, input: HTMLTextAreaElement): void {
  const row = doc.getElementById("first-questions");
  if (row === null) return;
  row.addEventListener("click", (ev) => {
    const target = ev.target instanceof Element ? ev.target.closest("button[data-question]") : null;
    if (!(target instanceof HTMLButtonElement)) return;
    input.value = target.dataset["question"] ?? "";
    form.requestSubmit();
  });
  form.addEventListener("submit", () => {
    row.hidden = true;
  });
}
