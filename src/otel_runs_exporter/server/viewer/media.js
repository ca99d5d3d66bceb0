// Images in runs: a message's image part or a data: URL anywhere in a value, shown as what it is.
//
// A raster image (png, jpeg, gif, webp) carried as a data: URL or as base64 with its type is drawn as a
// thumbnail that opens full size in the page; an SVG is a placeholder (it can carry script, and the page
// draws nothing it cannot vouch for); an image past IMAGE_AT a placeholder with its size; an address that
// is not data: is shown as text, never fetched (a run cannot make the page call another host). Base64 is
// never shown as text: a long base64 string is a placeholder with its size.

import { copyButton, cut, dataImage, fmtBytes, h } from "./dom.js";

export const IMAGE_AT = 2 * 1024 * 1024; // characters of base64 drawn as an image at most (about 1.5 MB of image)
const RASTER = new Map([["image/png", "image/png"], ["image/jpeg", "image/jpeg"], ["image/jpg", "image/jpeg"],
  ["image/gif", "image/gif"], ["image/webp", "image/webp"]]);
const DATA_URL = /^data:([\w.+-]+\/[\w.+-]+)?((?:;[\w-]+=[^;,]*)*)(;base64)?,/i;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const BASE64_AT = 1000; // a string this long of base64 characters only is data, not text
const MIXED = [/[A-Z]/, /[a-z]/, /[0-9+/]/]; // encoded bytes use them all; a word repeated ("xxxx...") does not

// An image's bytes as base64, as media: {mime, url (a data: URL the page may draw, or null), size, base64}.
function fromBase64(mime, payload) {
  const kind = String(mime || "").toLowerCase() || "image/*";
  const raster = RASTER.get(kind);
  // Checked only when it would be drawn: a 5 MB string is a placeholder, whatever its characters.
  const drawable = raster && payload.length <= IMAGE_AT && BASE64.test(payload);
  return { mime: kind, url: drawable ? `data:${raster};base64,${payload}` : null, size: payload.length, base64: true };
}

// What a string is when it is media (a data: URL, or long base64), else null: shown by mediaView().
export function mediaOf(text) {
  if (typeof text !== "string") return null;
  if (text.startsWith("data:")) {
    const m = DATA_URL.exec(text.slice(0, 300));
    if (m) {
      const mime = (m[1] || "text/plain").toLowerCase();
      const payload = text.slice(m[0].length);
      if (m[3]) return fromBase64(mime, payload);
      return { mime, url: null, size: payload.length, base64: false };
    }
  }
  if (text.length >= BASE64_AT && BASE64.test(text) && MIXED.every((kind) => kind.test(text.slice(0, BASE64_AT)))) {
    return { mime: null, url: null, size: text.length, base64: true };
  }
  return null;
}

function str(value) {
  return typeof value === "string" ? value : "";
}

// The image a message part carries, or null: {mime, url (a data: URL), href (another address), size}.
// OpenAI image_url / input_image, Anthropic image source (base64 or url), LangChain image blocks,
// the OTel GenAI blob and uri parts, Gemini inline_data.
export function imagePart(part) {
  if (!part || typeof part !== "object" || Array.isArray(part)) return null;
  const type = str(part.type);
  const fromUrl = (url) => mediaOf(url) || (url ? { mime: null, url: null, href: url, size: url.length } : null);
  if (type === "image_url" || "image_url" in part) {
    const inner = part.image_url;
    return fromUrl(typeof inner === "string" ? inner : inner && typeof inner === "object" ? str(inner.url) : "");
  }
  if (type === "input_image") return fromUrl(str(part.url));
  if (part.inline_data && typeof part.inline_data === "object") return fromBase64(part.inline_data.mime_type, str(part.inline_data.data));
  if (type === "image" || (type === "blob" && str(part.modality) === "image") || (type === "uri" && str(part.modality) === "image")) {
    const source = part.source && typeof part.source === "object" ? part.source : part;
    if (str(source.type) === "url" || str(source.url) || str(part.uri)) return fromUrl(str(source.url) || str(part.uri));
    const payload = str(source.data) || str(part.base64) || str(part.content) || str(part.data);
    return payload ? fromBase64(source.media_type || source.mime_type || part.mime_type, payload) : null;
  }
  return null;
}

// An image, or what stands in for one: never its bytes as text, never a request to another host.
export function mediaView(media) {
  const size = fmtBytes(Math.round(media.base64 ? (media.size * 3) / 4 : media.size));
  const kind = media.mime || "data";
  if (media.href) {
    // Not fetched: a page that loaded it would tell that host who read this run, and when.
    return h(
      "span",
      { class: "media media-link", title: "an image at another address: not fetched by the viewer" },
      "image at ",
      h("code", null, cut(media.href, 300)),
      copyButton(media.href, "image address"),
    );
  }
  if (kind === "image/svg+xml") return placeholder(`SVG image, ${size}`, "not drawn: an SVG can carry script");
  if (RASTER.has(kind) && media.size > IMAGE_AT) {
    return placeholder(`${kind} image, ${size}`, `larger than the ${fmtBytes(IMAGE_AT)} the viewer draws`);
  }
  if (!media.url) {
    const what = kind.startsWith("image/") ? `image (${kind})` : kind === "data" ? "base64 data" : kind;
    return placeholder(`${what}, ${size}`, RASTER.has(kind) ? "its base64 is malformed" : "not shown as text");
  }
  const thumb = dataImage(media.url, `${kind} image, ${size}: click to see it full size`, "thumb");
  const open = h("button", { type: "button", class: "media media-image", title: `${kind}, ${size}: full size` }, thumb);
  open.addEventListener("click", (event) => {
    event.preventDefault();
    event.stopPropagation();
    showFull(media.url, `${kind}, ${size}`);
  });
  return open;
}

function placeholder(text, why) {
  return h("span", { class: "media media-placeholder", title: why }, "▣ ", text, h("span", { class: "why" }, ` (${why})`));
}

// The image full size over the page; a click or Escape closes it.
function showFull(url, label) {
  const close = () => {
    layer.remove();
    document.removeEventListener("keydown", onKey);
  };
  const onKey = (event) => {
    if (event.key === "Escape") close();
  };
  const layer = h(
    "div",
    { class: "lightbox", role: "dialog", "aria-label": label, tabindex: "-1" },
    dataImage(url, label, "full"),
    h("span", { class: "lightbox-label" }, label, " · click or Esc to close"),
  );
  layer.addEventListener("click", close);
  document.addEventListener("keydown", onKey);
  document.body.appendChild(layer);
  layer.focus();
}
