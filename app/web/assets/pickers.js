// What a form picks from, for the pages that offer the pick (kept out of the pages
// themselves, so a page that only picks does not load another page's code): a customer's
// deploy keys (the create form and a service's Git tab).
import { useEffect, useState } from "./vendor/hooks.mjs";
import { api } from "./api.js";
import { can, showError } from "./ui.js";

/** The deploy keys of ``customerId`` (null while loading; [] without the permission). */
export function useDeployKeys(session, customerId, version = 0) {
  const [keys, setKeys] = useState(null);
  const allowed = can(session, "services:deploy");
  useEffect(() => {
    if (!allowed || !customerId) { setKeys([]); return undefined; }
    let live = true;
    setKeys(null);
    api("/api/deploy-keys", { query: { customer_id: customerId, per_page: 100 } })
      .then((r) => { if (live) setKeys(r.data); })
      .catch((e) => { if (live) { showError(e); setKeys([]); } });
    return () => { live = false; };
  }, [allowed, customerId, version]);
  return keys;
}
