"""Tables the demo activities write, so tests can count real side effects
and pick up the async-activity tokens the demo hands out."""

from django.db import models

from weft_django.fencing import FencedModel


class SideEffect(models.Model):
    kind = models.CharField(max_length=32)
    key = models.CharField(max_length=200)
    at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.kind} {self.key}"


class AsyncToken(models.Model):
    """A token handed out by ``hand_out_token`` (the "outside world" completes it).

    Keyed by the token: a hand-out that runs again (its engine died before
    recording it) hands out the same token, and writes nothing new.
    """

    token = models.CharField(max_length=128, primary_key=True)
    workflow_id = models.CharField(max_length=200, db_index=True)
    key = models.CharField(max_length=200)
    at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"token for {self.workflow_id}"


class FencedAccount(FencedModel):
    """An account an activity updates through ``fenced_update`` (docs/howto/fencing-tokens.md).

    ``writer`` names who wrote the balance last (the tests read it: the new
    owner's value must survive a stale owner's late write).
    """

    name = models.CharField(max_length=100, unique=True)
    balance = models.BigIntegerField(default=0)
    writer = models.CharField(max_length=200, blank=True, default="")

    def __str__(self) -> str:
        return f"{self.name}: {self.balance}"


class Stock(models.Model):
    """Units of a product left: what an atomic ``reserve`` step decrements
    (``@activity(atomic=True)``: the docs' exactly-once checkout)."""

    sku = models.CharField(max_length=64, primary_key=True)
    quantity = models.IntegerField()

    def __str__(self) -> str:
        return f"{self.sku}: {self.quantity}"


class StockMove(models.Model):
    """One applied change of a ``Stock`` row, written in the same transaction.

    Deliberately without a unique constraint: a step applied twice leaves two
    rows, which is how the tests and the chaos audit see a double application.
    """

    sku = models.CharField(max_length=64)
    workflow_id = models.CharField(max_length=200, db_index=True)
    kind = models.CharField(max_length=32)
    delta = models.IntegerField()
    at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.kind} {self.sku} {self.delta:+d} ({self.workflow_id})"
