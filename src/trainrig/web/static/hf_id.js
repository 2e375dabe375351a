// The Hugging Face model id box: it fetches nothing. It turns `org/name` into the address of that model's
// config.json on the Hub, for the person to open, download and upload (or paste) here; a gated or private
// model opens only where they are signed in, which is why the page never fetches it itself.

const ID = /^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._-]*$/;

export function hubConfigUrl(id) {
  return ID.test(id) ? `https://huggingface.co/${id}/blob/main/config.json` : null;
}

export function bindHfId(input, help) {
  const explain = () => {
    const id = input.value.trim();
    const url = hubConfigUrl(id);
    if (!id) {
      help.replaceChildren();
      return;
    }
    if (!url) {
      help.textContent = "A model id looks like meta-llama/Llama-3.1-8B: the owner, a slash, the name.";
      return;
    }
    const link = document.createElement("a");
    link.href = url;
    link.target = "_blank";
    link.rel = "noopener noreferrer";
    link.dataset.testid = "hf-config-link";
    link.textContent = url;
    help.replaceChildren("Open ", link, ", download the file and upload it below, or paste its text.",
      " Nothing is fetched from this page.");
  };
  input.addEventListener("input", explain);
  explain();
}
