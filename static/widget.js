(function(){function e(e,t,n){let r=e.createElement(`div`);r.dataset.instantChat=``;let i=r.attachShadow({mode:`open`}),a=e.createElement(`style`);a.textContent=`
:host{all:initial}
.launcher{position:fixed;right:20px;bottom:20px;z-index:2147483647;border:0;border-radius:28px;
padding:14px 20px;font:600 15px/1 system-ui,sans-serif;color:#fff;background:var(--accent);
box-shadow:0 4px 16px rgba(0,0,0,.25);cursor:pointer}
.launcher:focus-visible{outline:3px solid #000;outline-offset:2px}
.panel{position:fixed;right:20px;bottom:84px;z-index:2147483647;width:min(380px,calc(100vw - 40px));
height:min(600px,calc(100vh - 120px));border:0;border-radius:12px;background:#fff;
box-shadow:0 8px 32px rgba(0,0,0,.3)}
.panel[hidden]{display:none}`;let o=e.createElement(`button`);o.className=`launcher`,o.type=`button`,o.textContent=t.title,o.style.setProperty(`--accent`,t.accent_colour),o.setAttribute(`aria-expanded`,`false`),i.append(a,o);let s=null,c=()=>(s===null&&(s=e.createElement(`iframe`),s.className=`panel`,s.title=t.title,s.hidden=!0,s.src=t.panel_url,i.append(s)),s);addEventListener(`message`,e=>{e.origin===n&&e.data===`instant-chat:ready`&&s!==null&&!s.hidden&&s.contentWindow?.postMessage(`instant-chat:open`,n)}),o.addEventListener(`pointerenter`,c),o.addEventListener(`focus`,c),o.addEventListener(`click`,()=>{let e=c();e.hidden=!e.hidden,o.setAttribute(`aria-expanded`,String(!e.hidden)),e.hidden||(e.focus(),e.contentWindow?.postMessage(`instant-chat:open`,n))}),e.body.append(r)}var t=document.currentScript;if(t instanceof HTMLScriptElement&&t.dataset.site){let n=new URL(t.src).origin;fetch(`${n}/widget/config?site=${encodeURIComponent(t.dataset.site)}`).then(e=>e.ok?e.json():null).then(t=>{t!==null&&e(document,t,n)}).catch(()=>void 0)}})();
//# sourceMappingURL=widget.js.map