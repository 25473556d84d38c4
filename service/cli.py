"""`vsparta serve`: run the HTTP query service and web page with uvicorn.

Flags override ``VSPARTA_*`` environment variables, which override the defaults.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from vsparta.model.query_tokenizer import QueryTokenizer
from vsparta.model.resolve import ModelPathError, resolve_model_path
from vsparta.service.rerankers.registry import NONE as NO_RERANKER
from vsparta.service.rerankers.registry import RERANKERS
from vsparta.service.settings import ServiceSettings
from vsparta.service.term_floors import floors_path
from vsparta.termindex import open_index
from vsparta.termindex.registry import engine_of
from vsparta.termindex.weightings.registry import WEIGHTINGS

log = logging.getLogger(__name__)


def add_settings_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags shared by `serve` and `search`; unset flags fall back to the environment."""
    parser.add_argument(
        "--backend",
        metavar="SPEC",
        help="index spec: embedded:/path/to/index or http://host:9200/ALIAS (env VSPARTA_BACKEND)",
    )
    parser.add_argument(
        "--model",
        dest="model_path",
        metavar="PATH",
        help="saved model folder with tokenizer.json (env VSPARTA_MODEL_PATH)",
    )
    parser.add_argument(
        "--query-weights",
        choices=WEIGHTINGS.names(),
        help="how each query token is weighed, one of the weightings registered in "
        "termindex/weightings/registry.py (GET /search/options describes them; default counts: how "
        "often it occurs, the paper's rule) (env VSPARTA_QUERY_WEIGHTS)",
    )
    parser.add_argument(
        "--reranker",
        choices=[*RERANKERS.names(), NO_RERANKER],
        help="re-order the engine's first hits with a reranker registered in "
        "service/rerankers/registry.py; none by default (env VSPARTA_RERANKER)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_settings_arguments(parser)
    parser.add_argument(
        "--image-root",
        dest="image_roots",
        action="append",
        metavar="DIR",
        help="folder images may be served from; repeat for several (env VSPARTA_IMAGE_ROOTS)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s)")
    parser.add_argument("--port", type=int, default=8000, help="port (default: %(default)s)")
    parser.add_argument("--max-k", type=int, help="largest k a request may ask for (env VSPARTA_MAX_K)")
    parser.add_argument(
        "--engine-timeout",
        dest="engine_timeout_s",
        type=float,
        metavar="SECONDS",
        help="seconds per engine call before answering 503 (env VSPARTA_ENGINE_TIMEOUT_S)",
    )
    parser.add_argument(
        "--cors-origin", dest="cors_origins", action="append", metavar="URL", help="allow this origin (CORS)"
    )
    parser.add_argument(
        "--thumbnail-cache", dest="thumbnail_cache_dir", metavar="DIR", help="thumbnail folder"
    )
    parser.add_argument(
        "--wait-for-index",
        action="store_true",
        help="start even if the embedded index does not exist yet (answers 503 until an indexing job "
        "creates it); without this flag a missing index folder is reported as a typo",
    )


SETTING_FLAGS = (
    "backend",
    "model_path",
    "image_roots",
    "max_k",
    "engine_timeout_s",
    "cors_origins",
    "query_weights",
    "reranker",
)
FLAG_NAMES = {
    "backend": "--backend",
    "model_path": "--model",
    "image_roots": "--image-root",
    "max_k": "--max-k",
    "engine_timeout_s": "--engine-timeout",
    "cors_origins": "--cors-origin",
    "query_weights": "--query-weights",
    "reranker": "--reranker",
    "thumbnail_cache_dir": "--thumbnail-cache",
}


def settings_from_args(args: argparse.Namespace) -> ServiceSettings:
    """Settings from flags given on the command line, then the environment."""
    overrides: dict[str, Any] = {
        name: getattr(args, name)
        for name in (*SETTING_FLAGS, "thumbnail_cache_dir")
        if getattr(args, name, None) is not None
    }
    return ServiceSettings(**overrides)


def checked_model_path(args: argparse.Namespace, settings: ServiceSettings) -> str:
    """The tokenizer folder, local only (no network at query time), else ``ModelPathError``."""
    option = "--model" if getattr(args, "model_path", None) else "VSPARTA_MODEL_PATH"
    return resolve_model_path(
        settings.model_path, option=option, needs="tokenizer.json", allow_file=True, hub=False
    )


def explain_settings_error(exc: ValidationError) -> str:
    """One line per problem, naming the flag or variable to fix."""
    lines = []
    for err in exc.errors():
        field = str(err["loc"][0]) if err["loc"] else ""
        hint = (
            f" (--{field.replace('_path', '').replace('_', '-')} or VSPARTA_{field.upper()})" if field else ""
        )
        lines.append(f"{field or 'settings'}{hint}: {err['msg']}")
    return "; ".join(lines)


def setup_problem(args: argparse.Namespace, settings: ServiceSettings) -> str | None:
    """The one sentence that says why the model or an images folder cannot be served, or None.

    An empty images folder counts as missing here: Docker creates a bind mount's missing source
    folder as an empty one, so "empty" is how a mistyped VSPARTA_IMAGES reaches the container.
    """
    try:
        model = checked_model_path(args, settings)
    except ModelPathError as exc:
        return f"{exc}; set VSPARTA_MODEL to a trained model folder"
    if settings.match_term_floors and floors_path(Path(model)).is_file():
        try:
            settings.match_rule(QueryTokenizer.from_pretrained(model))
        except ValueError as exc:
            return f"{exc}; run `vsparta calibrate` again, or set VSPARTA_MATCH_TERM_FLOORS=false"
    for root in settings.image_roots:
        if not root.is_dir() or not any(root.iterdir()):
            return f"images folder {root} is missing or empty; set VSPARTA_IMAGES to your images folder"
    return None


def serve_not_ready(reason: str, settings: ServiceSettings, host: str, port: int) -> None:
    """Stay up and say why on /ready (503) instead of exiting into a restart loop."""
    import uvicorn

    from vsparta.service.not_ready import create_not_ready_app

    app = create_not_ready_app(reason, settings.retry_after_s)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


def serve(settings: ServiceSettings, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Run until interrupted. ``vsparta demo`` calls this after indexing."""
    import uvicorn

    from vsparta.service.app import create_app

    log.info("starting VisualSparta search on http://%s:%d/ (API docs: /docs)", host, port)
    uvicorn.run(create_app(settings), host=host, port=port, log_level="info", access_log=False)


def run(args: argparse.Namespace) -> int:
    try:
        settings = settings_from_args(args)
    except ValidationError as exc:
        log.error("invalid settings: %s", explain_settings_error(exc))
        return 2
    if settings.setup_errors == "not-ready":
        problem = setup_problem(args, settings)
        if problem:
            log.error("not ready: %s", problem)
            serve_not_ready(problem, settings, args.host, args.port)
            return 0
    checked_model_path(args, settings)  # one sentence (vsparta prints it) instead of a failed start-up
    local = engine_of(settings.backend).paths  # an engine of files on this machine (embedded)
    if local and not getattr(args, "wait_for_index", False):  # a missing folder is a typo, not an outage
        open_index(settings.backend).close()
    missing = [str(root) for root in settings.image_roots if not root.is_dir()]
    if missing:
        log.error("--image-root %s: no such folder", ", ".join(missing))
        return 2
    if not settings.image_roots:
        log.warning("no --image-root given: image and thumbnail URLs will answer 404")
    serve(settings, args.host, args.port)
    return 0
