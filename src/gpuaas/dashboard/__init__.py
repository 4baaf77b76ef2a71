"""The web dashboard: static assets only (``static/index.html``, ``app.js``, ``style.css``).

The page is plain modern JavaScript with no build step and no CDN; it talks to the HTTP API only
(the summary and SSE routes in ``gpuaas.api.dashboard_routes``, plus the Kubernetes-style routes).
No Python code lives here, so the API can serve these files without importing UI logic.
"""
