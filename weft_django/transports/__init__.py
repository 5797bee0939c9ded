"""How wakes reach the owning engine. The runtime defines the interface it
calls; transports implement it and never import the runtime's internals."""

from weft_django.transports.notify import aio as anotify  # registers the async done waiter
