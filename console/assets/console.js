// Tessera console: the upload queue (file picker and drag and drop; files
// over 16 MiB go up in 8 MiB parts of a multipart upload, with progress), a
// copy button for share links, "select all" for deleting many objects or
// versions, and a question before any form that destroys something is sent.
// Everything else works without script (a destructive form then goes
// without the question).
"use strict";

const MIB = 1024 * 1024;
const MULTIPART_FROM = 16 * MIB;
// S3 takes at most 10,000 parts: bigger files get bigger parts.
function partSize(size) {
  return Math.max(8 * MIB, Math.ceil(size / 10000 / MIB) * MIB);
}

function csrfToken() {
  const meta = document.querySelector('meta[name="csrf-token"]');
  return meta ? meta.content : "";
}

// POSTs `body` to `url`; resolves with the parsed JSON answer. `onProgress`
// gets the bytes sent so far.
function post(url, body, contentType, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", url);
    xhr.setRequestHeader("x-csrf-token", csrfToken());
    if (contentType) xhr.setRequestHeader("content-type", contentType);
    if (onProgress) xhr.upload.onprogress = (e) => onProgress(e.loaded);
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) {
        try {
          resolve(xhr.responseText ? JSON.parse(xhr.responseText) : {});
        } catch (e) {
          reject(new Error("unexpected answer from the console"));
        }
      } else {
        reject(new Error(xhr.getResponseHeader("x-console-error") || ("status " + xhr.status)));
      }
    };
    xhr.onerror = () => reject(new Error("the console could not be reached"));
    xhr.send(body);
  });
}

function query(params) {
  return Object.entries(params)
    .map(([k, v]) => encodeURIComponent(k) + "=" + encodeURIComponent(v))
    .join("&");
}

async function uploadOne(base, key, file, progress) {
  const report = (sent) => { progress.value = file.size ? sent / file.size : 1; };
  if (file.size < MULTIPART_FROM) {
    await post(base + "/upload?" + query({ key }), file, file.type || "application/octet-stream", report);
    report(file.size);
    return;
  }
  const started = await post(base + "/multipart/start?" + query({ key, type: file.type || "" }), null);
  const upload = started.upload_id;
  const parts = [];
  const PART = partSize(file.size);
  try {
    for (let offset = 0, part = 1; offset < file.size; offset += PART, part++) {
      const slice = file.slice(offset, Math.min(offset + PART, file.size));
      const answer = await post(
        base + "/upload?" + query({ key, upload_id: upload, part }),
        slice, "application/octet-stream", (sent) => report(offset + sent));
      parts.push({ part, etag: answer.etag });
    }
    await post(base + "/multipart/complete?" + query({ key, upload_id: upload }),
      JSON.stringify({ parts }), "application/json");
  } catch (e) {
    await post(base + "/multipart/abort?" + query({ key, upload_id: upload }), null).catch(() => {});
    throw e;
  }
}

function setUpUploads(form) {
  const input = form.querySelector('input[type="file"]');
  const drop = form.querySelector(".drop");
  const queue = form.querySelector(".queue");
  const status = form.querySelector(".upload-status");
  const base = "/buckets/" + encodeURIComponent(form.dataset.bucket);
  const prefix = form.dataset.prefix || "";
  let pending = [];
  let running = false;

  async function run() {
    if (running) return;
    running = true;
    let failed = 0;
    while (pending.length) {
      const { file, progress, label } = pending.shift();
      try {
        await uploadOne(base, prefix + file.name, file, progress);
        label.textContent = file.name + ": uploaded";
      } catch (e) {
        failed++;
        label.textContent = file.name + ": failed: " + e.message;
        label.classList.add("error");
      }
    }
    running = false;
    status.textContent = failed ? failed + " upload(s) failed" : "All uploads finished";
    if (!failed) window.location.reload();
  }

  function add(files) {
    for (const file of files) {
      const item = document.createElement("li");
      const label = document.createElement("span");
      label.textContent = file.name;
      const progress = document.createElement("progress");
      progress.max = 1;
      progress.value = 0;
      progress.setAttribute("aria-label", "Upload of " + file.name);
      item.append(label, progress);
      queue.append(item);
      pending.push({ file, progress, label });
    }
    status.textContent = "Uploading " + (pending.length) + " file(s)";
    run();
  }

  form.addEventListener("submit", (e) => { e.preventDefault(); add(input.files); input.value = ""; });
  input.addEventListener("change", () => { add(input.files); input.value = ""; });
  for (const name of ["dragenter", "dragover"]) {
    drop.addEventListener(name, (e) => { e.preventDefault(); drop.classList.add("over"); });
  }
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => {
    e.preventDefault();
    drop.classList.remove("over");
    add(e.dataTransfer.files);
  });
}

// The boxes a form ticks for deletion (every named checkbox in it).
function tickedIn(form) {
  return form.querySelectorAll('input[type="checkbox"][name]:checked').length;
}

// A form with data-confirm asks its question before it is sent, and is not
// sent unless the answer is yes. "{count}" in the question is the number of
// ticked boxes; with none ticked nothing is lost, so nothing is asked.
function askBeforeSending(form) {
  form.addEventListener("submit", (e) => {
    let question = form.dataset.confirm;
    if (question.includes("{count}")) {
      const count = tickedIn(form);
      if (count === 0) return;
      question = question.replaceAll("{count}", String(count));
    }
    if (!window.confirm(question)) e.preventDefault();
  });
}

document.addEventListener("DOMContentLoaded", () => {
  for (const form of document.querySelectorAll("form[data-confirm]")) askBeforeSending(form);
  for (const form of document.querySelectorAll("form.upload")) setUpUploads(form);
  for (const button of document.querySelectorAll("button.copy")) {
    button.hidden = false;
    button.addEventListener("click", () => {
      const field = document.getElementById(button.dataset.target);
      navigator.clipboard.writeText(field.value).then(() => { button.textContent = "Copied"; });
    });
  }
  for (const all of document.querySelectorAll("input.select-all")) {
    all.hidden = false;
    all.addEventListener("change", () => {
      for (const box of all.form.querySelectorAll('input[type="checkbox"][name]')) box.checked = all.checked;
    });
  }
});
