// The loader a customer's website includes: `<script src=".../widget.js" data-site="KEY" async>`.
// It must cost the host page nearly nothing: a classic script of a few kB that asks for the
// site's config, draws a launcher button in a shadow root (the page's CSS cannot reach it),
// and loads the panel (an iframe of this server) only when the launcher is hovered or focused,
// so the panel and its socket are ready by the click. A page whose origin the site does not
// allow gets 403 for the config and shows nothing.

interface WidgetConfig {
  title: string;
  accent_colour: string;
  panel_url: string;
}

const STYLE = `
:host{all:initial}
.launcher{position:fixed;right:20px;bottom:20px;z-index:2147483647;border:0;border-radius:28px;
padding:14px 20px;font:600 15px/1 system-ui,sans-serif;color:#fff;background:var(--accent);
box-shadow:0 4px 16px rgba(0,0,0,.25);cursor:pointer}
.launcher:focus-visible{outline:3px solid #000;outline-offset:2px}
.panel{position:fixed;right:20px;bottom:84px;z-index:2147483647;width:min(380px,calc(100vw - 40px));
height:min(600px,calc(100vh - 120px));border:0;border-radius:12px;background:#fff;
box-shadow:0 8px 32px rgba(0,0,0,.3)}
.panel[hidden]{display:none}`;

function mount(doc: Document, config: WidgetConfig, server: string): void {
  const holder = doc.createElement("div");
  holder.dataset["instantChat"] = "";
  const root = holder.attachShadow({ mode: "open" });
  const style = doc.createElement("style");
  style.textContent = STYLE;
  const launcher = doc.createElement("button");
  launcher.className = "launcher";
  launcher.type = "button";
  launcher.textContent = config.title;
  launcher.style.setProperty("--accent", config.accent_colour);
  launcher.setAttribute("aria-expanded", "false");
  root.append(style, launcher);
  let panel: HTMLIFrameElement | null = null;
  const preload = (): HTMLIFrameElement => {
    if (panel === null) {
      panel = doc.createElement("iframe");
      panel.className = "panel";
      panel.title = config.title;
      panel.hidden = true;
      panel.src = config.panel_url;
      root.append(panel);
    }
    return panel;
  };
  // The panel says when it is ready; a click that came before it loaded is told again.
  addEventListener("message", (ev) => {
    if (ev.origin === server && ev.data === "instant-chat:ready" && panel !== null && !panel.hidden) {
      panel.contentWindow?.postMessage("instant-chat:open", server);
    }
  });
  launcher.addEventListener("pointerenter", preload);
  launcher.addEventListener("focus", preload);
  launcher.addEventListener("click", () => {
    const frame = preload();
    frame.hidden = !frame.hidden;
    launcher.setAttribute("aria-expanded", String(!frame.hidden));
    if (!frame.hidden) {
      frame.focus();
      frame.contentWindow?.postMessage("instant-chat:open", server);
    }
  });
  doc.body.append(holder);
}

const script = document.currentScript;
if (script instanceof HTMLScriptElement && script.dataset["site"]) {
  const server = new URL(script.src).origin;
  fetch(`${server}/widget/config?site=${encodeURIComponent(script.dataset["site"])}`)
    .then((r) => (r.ok ? (r.json() as Promise<WidgetConfig>) : null))
    .then((config) => {
      if (config !== null) mount(document, config, server);
    })
    .catch(() => undefined); // no widget rather than an error on someone else's page
}
