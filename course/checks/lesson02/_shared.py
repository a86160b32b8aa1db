"""What exercises 2.4 and 2.5 share: removing the hooks an answer registered, through the
handle (or handles) it returned.
"""

from __future__ import annotations


def remove_handles(handles, answer_name="any_grad_hook"):
    """Remove the hooks behind ``handles`` (one handle or a list of them); an answer that
    returned something else is told to return its handles."""
    if isinstance(handles, (list, tuple)):
        for h in handles:
            h.remove()
    elif hasattr(handles, "remove"):  # one handle for all, like register_multi_grad_hook's
        handles.remove()
    else:
        raise TypeError(f"{answer_name} returned {type(handles).__name__}: return the handles")
