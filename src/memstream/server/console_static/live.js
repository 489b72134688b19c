// The console's live page: follows /console/live/events and adds each new memory at the top.
// Text only (textContent, never HTML), so a memory's content cannot become markup.
"use strict";
(function () {
  const list = document.getElementById("live");
  const lag = document.getElementById("lag");
  const state = document.getElementById("state");
  const source = new EventSource(list.dataset.events);
  function line(cls, text) {
    const div = document.createElement("div");
    div.className = cls;
    div.textContent = text;
    return div;
  }
  source.addEventListener("open", function () { state.textContent = "following"; });
  source.addEventListener("error", function () { state.textContent = "reconnecting…"; });
  source.addEventListener("ended", function () {
    state.textContent = "signed out";
    source.close();
  });
  source.addEventListener("memory", function (event) {
    const memory = JSON.parse(event.data);
    const item = document.createElement("li");
    const link = document.createElement("a");
    link.href = "/console/memories/" + encodeURIComponent(memory.id) + list.dataset.scope;
    link.textContent = memory.content;
    item.appendChild(link);
    item.appendChild(line("meta", memory.type + " · thread " + (memory.thread || "—") +
      " · " + memory.time + " · seen " + memory.lag_ms + " ms after its event"));
    list.insertBefore(item, list.firstChild);
  });
  source.addEventListener("lag", function (event) {
    const data = JSON.parse(event.data);
    lag.textContent = data.events === null ? "unknown" : data.events + " events";
  });
})();
