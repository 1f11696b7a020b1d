// SPDX-License-Identifier: MIT
// NFT collections of the moraine development chain whose token URIs point at
// the chain's own metadata server (package devchain, metadata.go): a good
// document for most tokens, and one token for each way metadata can fail, so
// that every indexStatus of the Data API's NftTokenMetadataStatus shows up.
// Compiled by gen.sh with Moraine.sol (a file of its own, so that the other
// contracts' bytecode, which embeds a hash of their source file, stays the
// same); the ABI and bytecode in build/ are committed.
pragma solidity 0.8.28;

/// How a token's URI is made.
library MetaURI {
    /// Default: baseURI + "<kind>/<id>.json" (ERC-721) or baseURI + "erc1155/{id}.json" (ERC-1155).
    uint8 constant DEFAULT = 0;
    /// baseURI + the token's path.
    uint8 constant PATH = 1;
    /// The token's string as it is (a data:, ipfs:, ftp: URI, or not a URI at all).
    uint8 constant ABSOLUTE = 2;
    /// A return value that is not an ABI string.
    uint8 constant NOT_STRING = 3;
    /// Executes an invalid opcode: the call fails in the EVM without
    /// reverting (as running out of gas does, at once rather than after
    /// burning the node's whole eth_call gas cap).
    uint8 constant INVALID_OPCODE = 4;

    function decimal(uint256 v) internal pure returns (string memory) {
        if (v == 0) {
            return "0";
        }
        uint256 digits;
        for (uint256 t = v; t != 0; t /= 10) {
            digits++;
        }
        bytes memory out = new bytes(digits);
        for (; v != 0; v /= 10) {
            out[--digits] = bytes1(uint8(48 + v % 10));
        }
        return string(out);
    }

    /// uri answers for a token of the given mode; for DEFAULT it returns def.
    function answer(uint8 mode, string memory base, string memory s, string memory def) internal pure returns (string memory) {
        if (mode == PATH) {
            return string.concat(base, s);
        }
        if (mode == ABSOLUTE) {
            return s;
        }
        if (mode == NOT_STRING) {
            assembly {
                mstore(0, 5)
                return(0, 32)
            }
        }
        if (mode == INVALID_OPCODE) {
            assembly {
                invalid()
            }
        }
        return string.concat(base, def);
    }
}

/// An ERC-721 collection with per-token URI modes and a base URI its owner
/// sets (the development chain points it at its metadata server on every start).
contract MoraineMetaERC721 {
    string public name;
    string public symbol;
    address public owner;
    string public baseURI;
    mapping(uint256 => address) public ownerOf;
    mapping(address => uint256) public balanceOf;
    mapping(uint256 => uint8) public uriMode;
    mapping(uint256 => string) private uriText;

    event Transfer(address indexed from, address indexed to, uint256 indexed tokenId);

    constructor(string memory name_, string memory symbol_, string memory baseURI_) {
        name = name_;
        symbol = symbol_;
        baseURI = baseURI_;
        owner = msg.sender;
    }

    function supportsInterface(bytes4 id) external pure returns (bool) {
        return id == 0x01ffc9a7 || id == 0x80ac58cd || id == 0x5b5e139f;
    }

    function setBaseURI(string calldata baseURI_) external {
        require(msg.sender == owner, "MetaERC721: not the owner");
        baseURI = baseURI_;
    }

    function tokenURI(uint256 tokenId) external view returns (string memory) {
        require(ownerOf[tokenId] != address(0), "ERC721: invalid token ID");
        return MetaURI.answer(uriMode[tokenId], baseURI, uriText[tokenId],
            string.concat("erc721/", MetaURI.decimal(tokenId), ".json"));
    }

    /// mint creates a token with the default URI: anybody may (it is test traffic).
    function mint(address to, uint256 tokenId) external {
        _mint(to, tokenId);
    }

    /// mintWithURI creates a token with its own URI mode (the owner's special tokens).
    function mintWithURI(address to, uint256 tokenId, uint8 mode, string calldata text) external {
        require(msg.sender == owner, "MetaERC721: not the owner");
        uriMode[tokenId] = mode;
        uriText[tokenId] = text;
        _mint(to, tokenId);
    }

    function transferFrom(address from, address to, uint256 tokenId) external {
        require(ownerOf[tokenId] == from && from != address(0), "ERC721: transfer from incorrect owner");
        require(to != address(0), "ERC721: transfer to the zero address");
        require(msg.sender == from, "ERC721: caller is not token owner");
        balanceOf[from] -= 1;
        balanceOf[to] += 1;
        ownerOf[tokenId] = to;
        emit Transfer(from, to, tokenId);
    }

    /// burn destroys a token: its tokenURI reverts from then on.
    function burn(uint256 tokenId) external {
        address holder = ownerOf[tokenId];
        require(holder != address(0) && msg.sender == holder, "ERC721: caller is not token owner");
        balanceOf[holder] -= 1;
        delete ownerOf[tokenId];
        emit Transfer(holder, address(0), tokenId);
    }

    function _mint(address to, uint256 tokenId) internal {
        require(to != address(0), "ERC721: mint to the zero address");
        require(ownerOf[tokenId] == address(0), "ERC721: token already minted");
        ownerOf[tokenId] = to;
        balanceOf[to] += 1;
        emit Transfer(address(0), to, tokenId);
    }
}

/// An ERC-1155 collection whose uri(id) is the EIP-1155 template
/// baseURI + "erc1155/{id}.json" unless the id has its own URI mode.
contract MoraineMetaERC1155 {
    string public name;
    string public symbol;
    address public owner;
    string public baseURI;
    mapping(uint256 => mapping(address => uint256)) public balanceOf;
    mapping(uint256 => uint8) public uriMode;
    mapping(uint256 => string) private uriText;

    event TransferSingle(address indexed operator, address indexed from, address indexed to, uint256 id, uint256 value);
    event URI(string value, uint256 indexed id);

    constructor(string memory name_, string memory symbol_, string memory baseURI_) {
        name = name_;
        symbol = symbol_;
        baseURI = baseURI_;
        owner = msg.sender;
    }

    function supportsInterface(bytes4 id) external pure returns (bool) {
        return id == 0x01ffc9a7 || id == 0xd9b67a26 || id == 0x0e89341c;
    }

    function setBaseURI(string calldata baseURI_) external {
        require(msg.sender == owner, "MetaERC1155: not the owner");
        baseURI = baseURI_;
    }

    function uri(uint256 id) external view returns (string memory) {
        return MetaURI.answer(uriMode[id], baseURI, uriText[id], "erc1155/{id}.json");
    }

    function setURI(uint256 id, uint8 mode, string calldata text) external {
        require(msg.sender == owner, "MetaERC1155: not the owner");
        uriMode[id] = mode;
        uriText[id] = text;
        emit URI(text, id);
    }

    /// mint adds value of id to to: anybody may (it is test traffic).
    function mint(address to, uint256 id, uint256 value) external {
        require(to != address(0), "ERC1155: mint to the zero address");
        balanceOf[id][to] += value;
        emit TransferSingle(msg.sender, address(0), to, id, value);
    }

    function safeTransferFrom(address from, address to, uint256 id, uint256 value, bytes calldata) external {
        require(from == msg.sender, "ERC1155: caller is not token owner");
        require(to != address(0), "ERC1155: transfer to the zero address");
        uint256 bal = balanceOf[id][from];
        require(bal >= value, "ERC1155: insufficient balance for transfer");
        unchecked {
            balanceOf[id][from] = bal - value;
        }
        balanceOf[id][to] += value;
        emit TransferSingle(msg.sender, from, to, id, value);
    }
}
