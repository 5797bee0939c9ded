"""How wakes reach the owning engine. The runtime defines the interface it
calls; transports implement it and never import the runtime's internals."""
