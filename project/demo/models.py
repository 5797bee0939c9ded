"""A table the demo activities write, so tests can count real side effects."""

from django.db import models


class SideEffect(models.Model):
    kind = models.CharField(max_length=32)
    key = models.CharField(max_length=200)
    at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.kind} {self.key}"
