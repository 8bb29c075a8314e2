"""The in-memory form of one remoting frame (upstream ``RemotingCommand``).

A command is plain data: the codec in :mod:`remoting.frame` turns it into bytes and
back. ``ext_fields`` keeps the upstream distinction between "no custom header"
(``None``: the JSON key is omitted) and "a custom header whose fields are all null"
(``{}``: written as ``"extFields":{}``), because real 4.9.4 answers differ on it.
"""

from __future__ import annotations

from dataclasses import dataclass

from remoting.codes import (
    CURRENT_VERSION,
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    LanguageCode,
    SerializeType,
)


@dataclass(slots=True)
class RemotingCommand:
    """One request or response as it travels on a RocketMQ connection.

    ``language`` is ``None`` when the peer sent a language this codec does not know
    (upstream decodes it to ``null`` as well). ``body`` is ``None`` for an empty body.
    """

    code: int
    language: LanguageCode | None = LanguageCode.JAVA
    version: int = 0
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] | None = None
    body: bytes | None = None
    serialize_type: SerializeType = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        """True when the response bit (bit 0) of ``flag`` is set."""
        return self.flag & FLAG_RESPONSE == FLAG_RESPONSE

    @property
    def is_oneway(self) -> bool:
        """True when the one-way bit (bit 1) of ``flag`` is set: no answer is expected."""
        return self.flag & FLAG_ONEWAY == FLAG_ONEWAY

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: dict[str, str] | None = None,
        body: bytes | None = None,
        *,
        opaque: int = 0,
        version: int = CURRENT_VERSION,
        language: LanguageCode | None = LanguageCode.JAVA,
        serialize_type: SerializeType = SerializeType.JSON,
        oneway: bool = False,
    ) -> RemotingCommand:
        """Build a request as a Java 5.x client would (``createRequestCommand``)."""
        return cls(
            code=int(code),
            language=language,
            version=int(version),
            opaque=opaque,
            flag=FLAG_ONEWAY if oneway else 0,
            ext_fields=ext_fields,
            body=body,
            serialize_type=serialize_type,
        )

    def make_response(
        self,
        code: int,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: bytes | None = None,
    ) -> RemotingCommand:
        """The answer to this request; see :func:`make_response`."""
        return make_response(self, code, remark, ext_fields, body)


def make_response(
    request: RemotingCommand,
    code: int,
    remark: str | None = None,
    ext_fields: dict[str, str] | None = None,
    body: bytes | None = None,
) -> RemotingCommand:
    """Build the answer to ``request`` the way the 4.9.4+ server does.

    The response carries the request's opaque (clients match answers by it, and
    answers may come back out of order), the response flag bit, ``language JAVA``,
    our ``CURRENT_VERSION`` and the request's serialize type (ali-ons reads the
    header-length word without masking the type byte, so it must get JSON back).
    """
    return RemotingCommand(
        code=int(code),
        language=LanguageCode.JAVA,
        version=int(CURRENT_VERSION),
        opaque=request.opaque,
        flag=FLAG_RESPONSE,
        remark=remark,
        ext_fields=ext_fields,
        body=body,
        serialize_type=request.serialize_type,
    )
